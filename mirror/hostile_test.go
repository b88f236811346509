package mirror

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/hostile"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

const vhome = "/home/w"

func dialVFS(t *testing.T, v *hostile.VFS) *sshfs.FS {
	t.Helper()
	srv := hostile.Start(t, t.TempDir(), v)
	f, err := sshfs.Dial(context.Background(), sshfs.Config{Alias: "hostile", HostName: srv.Host, Port: srv.Port, User: srv.User,
		IdentityFiles: []string{srv.IdentityFile}, KnownHostsFiles: []string{srv.KnownHosts}, ConnectTimeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func vfsPublish(t *testing.T, f *sshfs.FS, st *State) (Result, *State) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return Publish(ctx, f, st, Options{Host: "hostile", Dir: "~/mirror", Files: files("memory/cards/a.md", "card a\n", "TOOLS.md", "tools\n"),
		Canonical: "c", RunID: "r", Now: time.Now()})
}

// outsideMirror lists the VFS's paths outside the mirror directory.
func outsideMirror(v *hostile.VFS) []string {
	var out []string
	for _, p := range v.Paths() {
		if p != vhome+"/mirror" && !strings.HasPrefix(p, vhome+"/mirror/") {
			out = append(out, p)
		}
	}
	return out
}

// TestPublishHostileNames: a host that lists a name with a slash, or one
// that would climb out, in the mirror stops the mirror. Invariant:
// nothing outside the mirror path changes, and nothing is written.
func TestPublishHostileNames(t *testing.T) {
	for _, name := range []string{"../../../etc/passwd", "x/y.md", "bad\x00.md", "esc\x1b[31m.md"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			v := hostile.NewVFS(vhome)
			v.Writable = true
			v.Add(vhome+"/victim", hostile.File("keep"))
			v.Add(vhome+"/mirror/memory/cards", hostile.Dir()).Extra = []os.FileInfo{hostile.Entry(name, 0o444, 7)}
			before := outsideMirror(v)
			r, _ := vfsPublish(t, dialVFS(t, v), nil)
			if r.Outcome != OutcomeError {
				t.Fatalf("outcome %s; want an error", r.Outcome)
			}
			if after := outsideMirror(v); !slices.Equal(before, after) || string(v.Node(vhome+"/victim").Data) != "keep" {
				t.Errorf("outside the mirror: %q, then %q", before, after)
			}
			for _, req := range v.Requests() {
				if strings.HasPrefix(req, "Write ") || strings.HasPrefix(req, "Rename ") || strings.HasPrefix(req, "Remove ") {
					t.Errorf("a refused mirror still did %s", req)
				}
			}
		})
	}
}

// TestPublishLyingSizes: a host that lists every file at a size other
// than it holds gets the files again each run, and is never read from.
// Invariant: nothing read from the host but listings; nothing written
// outside the mirror path.
func TestPublishLyingSizes(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable = true
	f := dialVFS(t, v)
	r, st := vfsPublish(t, f, nil)
	mustOK(t, r)
	for _, p := range v.Paths() {
		if n := v.Node(p); n.Mode.IsRegular() {
			n.Size = 1 << 40 // what LSTAT and READDIR now say
		}
	}
	r, _ = vfsPublish(t, f, st)
	mustOK(t, r)
	if !slices.Contains(r.Sent, "memory/cards/a.md") {
		t.Errorf("a file the host lies about was not sent again: %q", r.Sent)
	}
	for _, req := range v.Requests() {
		if strings.HasPrefix(req, "Open ") {
			t.Errorf("the publisher read from the host: %s", req)
		}
	}
	if got := string(v.Node(vhome + "/mirror/memory/cards/a.md").Data); got != "card a\n" {
		t.Errorf("a.md holds %q", got)
	}
	if out := outsideMirror(v); !slices.Equal(out, []string{"/", "/home", vhome}) {
		t.Errorf("paths outside the mirror: %q", out)
	}
}

// TestPublishEndlessListing: a directory that lists without end fails the
// mirror at the listing bound, promptly. Invariant: the canonical host
// reads no more than the bound; nothing is written.
func TestPublishEndlessListing(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable = true
	v.Add(vhome+"/mirror/memory/cards", hostile.Dir()).List = func(dst []os.FileInfo, off int64) (int, error) {
		for i := range dst {
			dst[i] = hostile.Entry(fmt.Sprintf("c%09d.md", off+int64(i)), 0o444, 10)
		}
		return len(dst), nil
	}
	r, _ := vfsPublish(t, dialVFS(t, v), nil)
	if r.Outcome != OutcomeError {
		t.Fatalf("outcome %s; want an error", r.Outcome)
	}
	for _, req := range v.Requests() {
		if strings.HasPrefix(req, "Write ") {
			t.Errorf("wrote after an endless listing: %s", req)
		}
	}
}

// TestPublishStalledHost: a host that stops answering mid-publish (its
// rename never returns) cannot hold the publisher past its deadline.
// Invariant: the publish ends with an error once its context does, long
// before the server would have answered.
func TestPublishStalledHost(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable = true
	release := make(chan struct{})
	defer close(release)
	v.Rename = func(from, to string) (bool, error) {
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
		return true, os.ErrPermission
	}
	f := dialVFS(t, v)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		r, _ := Publish(ctx, f, nil, Options{Host: "stalled", Dir: "~/mirror", Files: files("TOOLS.md", "x\n"), Now: time.Now()})
		done <- r
	}()
	select {
	case r := <-done:
		if r.Outcome != OutcomeError {
			t.Fatalf("outcome %s; want an error", r.Outcome)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the publish was still waiting on a stalled host 30 s after its 0.5 s deadline")
	}
}
