package doctor

import (
	"testing"

	"github.com/handoff-sync/handoff/receipts"
)

// A stored error's own hint becomes the check's hint, and its message one
// line: no "hint:" line lands unindented inside a check's block.
func TestSplitHint(t *testing.T) {
	for _, tc := range []struct{ in, msg, hint string }{
		{"dial: refused\nhint: start sshd", "dial: refused", "start sshd"},
		{"a\nb; hint: do x", "a; b", "do x"},
		{"plain", "plain", ""},
	} {
		if m, h := splitHint(tc.in); m != tc.msg || h != tc.hint {
			t.Errorf("splitHint(%q) = %q, %q; want %q, %q", tc.in, m, h, tc.msg, tc.hint)
		}
	}
}

// A partial run always says why: failed hosts, inboxes not listed,
// mirrors that failed; never "partial ()".
func TestPartialReasons(t *testing.T) {
	r := &receipts.Receipt{Hosts: []receipts.Host{
		{Name: "laptop", Outcome: receipts.HostError},
		{Name: "vps", Outcome: receipts.HostOK, Inboxes: []receipts.Inbox{{State: "ok"}, {State: receipts.InboxError}}},
		{Name: "nas", Outcome: receipts.HostOK, Mirror: &receipts.Mirror{Outcome: receipts.HostError}},
		{Name: "ok", Outcome: receipts.HostOK, Mirror: &receipts.Mirror{Outcome: "ok"}},
	}}
	if got, want := partialReasons(r), "failed: laptop; inbox not listed: vps; mirror failed: nas"; got != want {
		t.Errorf("partialReasons = %q, want %q", got, want)
	}
}
