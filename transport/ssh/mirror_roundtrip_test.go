package ssh

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/mirror"
)

// TestMirrorIdleRoundTrips: publishing a mirror that is up to date costs
// two round trips on OpenSSH's sftp-server (its LSTATs, REALPATHs and
// listings all go out at once, and each listing reads ahead), and writes
// nothing. The login directory was asked for by the pull already.
func TestMirrorIdleRoundTrips(t *testing.T) {
	t.Parallel()
	var srv = servers[1]
	if srv.name != "openssh-sftp-server" {
		t.Fatal("servers[1] is not OpenSSH's sftp-server")
	}
	serve := srv.serve(t)
	dir := filepath.Join(t.TempDir(), "mirror")
	r := &relay{rtt: 5 * time.Millisecond, readGate: time.Second}
	f := startRelayed(t, r, serve)
	var files []mirror.File
	for i := range 60 {
		files = append(files, mirror.NewFile(fmt.Sprintf("memory/cards/c%03d.md", i), []byte("card\n")))
	}
	files = append(files, mirror.NewFile("TOOLS.md", []byte("tools\n")))
	publish := func(st *mirror.State) (mirror.Result, *mirror.State) {
		res, next := mirror.Publish(context.Background(), f, st, mirror.Options{Host: "h", Dir: dir, Files: files, Now: time.Now()})
		if res.Outcome != mirror.OutcomeOK {
			t.Fatalf("publish: %s", res.Error)
		}
		return res, next
	}
	_, st := publish(nil)
	if _, err := f.Home(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r.snapshot(t)
	r.reset()
	r.mu.Lock()
	r.byHandle = true
	r.mu.Unlock()
	res, _ := publish(st)
	if len(res.Sent)+len(res.Removed) != 0 {
		t.Fatalf("idle publish sent %q, removed %q", res.Sent, res.Removed)
	}
	s := r.snapshot(t)
	if s.depth > 2 || s.byType[reqWrite] != 0 || s.byType[reqRename] != 0 {
		t.Errorf("an idle publish: %d round trips, requests %s; want at most 2 round trips and no write", s.depth, s.seq)
	}
	t.Logf("idle publish: %d round trips, %d requests", s.depth, s.requests)
}
