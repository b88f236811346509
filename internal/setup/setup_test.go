package setup

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/manifest"
)

func testManifest(t *testing.T) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(`version: 1
workspace: /ws
hosts:
  - {name: a, transport: local, inboxes: [/a/.claude/memory-handoffs]}
  - {name: b, transport: local, inboxes: [/b/.claude/memory-handoffs]}
  - {name: c, transport: local, inboxes: [/c/.claude/memory-handoffs]}
`), filepath.Join(t.TempDir(), "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A command touches only the hosts it was asked for, each once: an
// unknown name is a usage error that names the hosts there are.
func TestHosts(t *testing.T) {
	m := testManifest(t)
	names := func(hs []manifest.HostConfig) string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		ask  []string
		want string
	}{
		{nil, "a,b,c"},
		{[]string{"c", "a"}, "c,a"},
		{[]string{"b", "b"}, "b"},
	} {
		hs, err := Hosts(m, tc.ask)
		if err != nil || names(hs) != tc.want {
			t.Errorf("Hosts(%v) = %s, %v; want %s", tc.ask, names(hs), err, tc.want)
		}
	}
	_, err := Hosts(m, []string{"a", "nope"})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "a, b, c") {
		t.Errorf("unknown host: %v; want a UsageError naming it and the hosts", err)
	}
}

func TestWorkspace(t *testing.T) {
	m := testManifest(t)
	if ws, err := Workspace(m, ""); err != nil || ws != "/ws" {
		t.Errorf("Workspace(m, \"\") = %q, %v; want the manifest's", ws, err)
	}
	if ws, err := Workspace(m, "rel"); err != nil || !filepath.IsAbs(ws) || filepath.Base(ws) != "rel" {
		t.Errorf("Workspace(m, rel) = %q, %v; want it absolute", ws, err)
	}
}
