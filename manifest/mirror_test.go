package manifest

import (
	"slices"
	"strings"
	"testing"
)

// TestMirrorResolved: the defaults' mirror reaches ssh hosts, not local
// ones; a host's own block wins, and mirror: false turns it off.
func TestMirrorResolved(t *testing.T) {
	doc := "version: 1\ndefaults:\n  mirror: {path: ~/.openclaw/mirror}\nhosts:\n" +
		"  - {name: laptop, transport: ssh, ssh: {host: laptop}, inboxes: [~/a/.claude/memory-handoffs]}\n" +
		"  - {name: server, transport: ssh, ssh: {host: server}, inboxes: [~/a/.claude/memory-handoffs], mirror: false}\n" +
		"  - {name: box, transport: ssh, ssh: {host: box}, inboxes: [~/a/.claude/memory-handoffs], mirror: {path: /srv/mem/, include: [cards]}}\n" +
		"  - {name: here, transport: local, inboxes: [~/a/.claude/memory-handoffs]}\n" +
		"  - {name: here2, transport: local, inboxes: [~/b/.claude/memory-handoffs], mirror: {path: ~/m}}\n"
	m, err := parse(t, doc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*MirrorConfig{
		"laptop": {Path: "~/.openclaw/mirror", Include: []string{"cards", "documents"}},
		"server": nil,
		"box":    {Path: "/srv/mem", Include: []string{"cards"}},
		"here":   nil,
		"here2":  {Path: "~/m", Include: []string{"cards", "documents"}},
	}
	for name, w := range want {
		h, _ := m.Host(name)
		got := h.Mirror
		if (got == nil) != (w == nil) || got != nil && (got.Path != w.Path || !slices.Equal(got.Include, w.Include)) {
			t.Errorf("%s: mirror %+v; want %+v", name, got, w)
		}
	}
	if h, _ := m.Host("box"); h.Mirror.Includes(MirrorDocuments) || !h.Mirror.Includes(MirrorCards) {
		t.Errorf("box includes: %v", h.Mirror.Include)
	}
}

// TestMirrorRefused: each bad mirror is an error naming the host and the
// field, with a hint.
func TestMirrorRefused(t *testing.T) {
	ssh := "{name: laptop, transport: ssh, ssh: {host: laptop}, inboxes: [~/a/.claude/memory-handoffs], mirror: "
	for _, tc := range []struct {
		name, mirror, field, msg string
	}{
		{"true", "true}", "hosts[0].mirror", "nowhere"},
		{"a string", "~/m}", "hosts[0].mirror", "mapping"},
		{"unknown field", "{path: ~/m, paht: x}}", "hosts[0].mirror", "unknown field"},
		{"no path", "{include: [cards]}}", "hosts[0].mirror.path", "missing"},
		{"relative", "{path: m}}", "hosts[0].mirror.path", "not absolute"},
		{"the root", "{path: /}}", "hosts[0].mirror.path", "whole tree"},
		{"the home", "{path: '~'}}", "hosts[0].mirror.path", "whole tree"},
		{"a home", "{path: /home/alice}}", "hosts[0].mirror.path", "home directory"},
		{"root's home", "{path: /root/}}", "hosts[0].mirror.path", "home directory"},
		{"in an inbox", "{path: ~/x/.codex/memory-handoffs/m}}", "hosts[0].mirror.path", "inside a memory-handoffs inbox"},
		{"above an inbox", "{path: ~/a}}", "hosts[0].mirror.path", "overlaps the inbox"},
		{"escapes", "{path: ~/../x}}", "hosts[0].mirror.path", "not absolute"},
		{"bad include", "{path: ~/m, include: [notes]}}", "hosts[0].mirror.include[0]", "not something"},
		{"empty include", "{path: ~/m, include: []}}", "hosts[0].mirror.include", "empty"},
		{"twice", "{path: ~/m, include: [cards, cards]}}", "hosts[0].mirror.include[1]", "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, hosts(ssh+tc.mirror))
			fe := findError(t, err, "laptop", tc.field)
			if !strings.Contains(fe.Msg, tc.msg) || fe.Hint == "" {
				t.Errorf("error %q (hint %q); want it to say %q, with a hint", fe.Msg, fe.Hint, tc.msg)
			}
		})
	}
	// The defaults' mirror is checked against each ssh host's inboxes.
	doc := "version: 1\ndefaults: {mirror: {path: ~/a}}\nhosts:\n  - {name: laptop, transport: ssh, ssh: {host: l}, inboxes: [~/a/.claude/memory-handoffs]}\n"
	_, err := parse(t, doc)
	if fe := findError(t, err, "laptop", "defaults.mirror.path"); !strings.Contains(fe.Msg, "overlaps") {
		t.Errorf("defaults mirror over an inbox: %v", fe)
	}
}
