package ssh

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
)

// TestDiscoverRoundTripsWithHint: on OpenSSH's sftp-server, a walk of
// roots, groups, repositories and inboxes (max_depth 2) costs a chain of
// round trips per level; given the previous walk's calls it asks them all
// at once and costs at most three (a listing's open, read and read to the
// end), with the same inboxes found.
func TestDiscoverRoundTripsWithHint(t *testing.T) {
	t.Parallel()
	var srv = servers[1]
	if srv.name != "openssh-sftp-server" {
		t.Fatal("servers[1] is not OpenSSH's sftp-server")
	}
	root := t.TempDir()
	for g := range 3 {
		for r := range 4 {
			inbox := filepath.Join(root, "code", fmt.Sprintf("g%d", g), fmt.Sprintf("r%d", r), ".claude", "memory-handoffs")
			if err := os.MkdirAll(inbox, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := &relay{rtt: 5 * time.Millisecond, readGate: time.Second}
	f := startRelayed(t, r, srv.serve(t))
	walk := func(hint []claim.WalkCall) ([]string, []claim.WalkCall, stats) {
		r.snapshot(t)
		r.reset()
		cfg := claim.Config{Host: "h", Harnesses: []string{".claude", ".codex"}, Roots: []claim.Root{{Path: filepath.Join(root, "code"), MaxDepth: 2}}, Hint: claim.Hint{Calls: hint}}
		var walked []claim.WalkCall
		cfg.Walked = func(h claim.Hint) { walked = h.Calls }
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ins, err := claim.Discover(ctx, f, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, in := range ins {
			found = append(found, in.Path+" "+in.State)
		}
		return found, walked, r.snapshot(t)
	}
	first, hint, cold := walk(nil)
	if len(first) != 12 {
		t.Fatalf("found %d inboxes, want 12: %q", len(first), first)
	}
	again, _, warm := walk(hint)
	if !slices.Equal(again, first) {
		t.Fatalf("with the hint found %q, want %q", again, first)
	}
	if warm.depth > 3 || warm.depth >= cold.depth {
		t.Errorf("with the hint: %d round trips (%d requests), without: %d; want at most 3", warm.depth, warm.requests, cold.depth)
	}
	t.Logf("walk: %d round trips without a hint, %d with (%d and %d requests, %d calls in the hint)", cold.depth, warm.depth, cold.requests, warm.requests, len(hint))
}
