package mirror

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

// BenchmarkPublish1000 publishes 1,000 cards of about 1 KiB to a mirror
// over real OpenSSH on loopback: first a mirror that is empty (every
// card sent), then one that is up to date (one wave of listings). Run
// with `bench/mirror.sh`; needs sshd, skips without it.
func BenchmarkPublish1000(b *testing.B) {
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		b.Skip("no sshd")
	}
	srv := sshdtest.StartOpenSSH(b, sshdtest.Options{})
	fsys, err := sshfs.Dial(context.Background(), sshfs.Config{Alias: "bench", HostName: srv.Host, Port: srv.Port, User: srv.User,
		IdentityFiles: []string{srv.IdentityFile}, KnownHostsFiles: []string{srv.KnownHosts}, ConnectTimeout: 10 * time.Second}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer fsys.Close()
	var cards []File
	for i := range 1000 {
		body := fmt.Sprintf("---\ntopic: card %d\ncategory: bench\ntags: []\n---\n%s", i, strings.Repeat("memory line\n", 85))
		cards = append(cards, NewFile(fmt.Sprintf("memory/cards/card-%04d.md", i), []byte(body)))
	}
	run := func(b *testing.B, dir string, st *State) (Result, *State) {
		r, next := Publish(context.Background(), fsys, st, Options{Host: "bench", Dir: dir, Files: cards, Canonical: "c", RunID: "r", Now: time.Now()})
		if r.Outcome != OutcomeOK {
			b.Fatal(r.Error)
		}
		return r, next
	}
	b.Run("first", func(b *testing.B) {
		for i := range b.N {
			dir := filepath.Join(b.TempDir(), fmt.Sprint(i))
			r, _ := run(b, dir, nil)
			if len(r.Sent) != 1002 {
				b.Fatalf("sent %d files", len(r.Sent))
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "m")
		_, st := run(b, dir, nil)
		b.ResetTimer()
		for range b.N {
			r, _ := run(b, dir, st)
			if len(r.Sent) != 0 {
				b.Fatalf("sent %d files", len(r.Sent))
			}
		}
	})
}
