package doctor_test

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/handoff-sync/handoff/internal/doctor"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/transport"
)

// probeFS is the local file system with Mkdir refused (deny) or recorded.
type probeFS struct {
	transport.Local
	deny    bool
	mu      sync.Mutex
	made    []string
	removed []string
}

func (p *probeFS) Mkdir(ctx context.Context, name string) error {
	if p.deny {
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrPermission}
	}
	err := p.Local.Mkdir(ctx, name)
	if err == nil {
		p.mu.Lock()
		p.made = append(p.made, name)
		p.mu.Unlock()
	}
	return err
}

func (p *probeFS) Remove(ctx context.Context, name string) error {
	p.mu.Lock()
	p.removed = append(p.removed, name)
	p.mu.Unlock()
	return p.Local.Remove(ctx, name)
}

// TestDoctorArchiveDenied: an inbox the account can list but not create
// entries in fails doctor (a sync would store its handoffs and never
// archive them), with the hint a sync gives for it. Invariant: doctor
// leaves the host's tree as it found it.
func TestDoctorArchiveDenied(t *testing.T) {
	e := newDrEnv(t, "")
	before := testenv.Tree(t, e.Dir)
	rep := e.doctor(func(o *doctor.Options) {
		o.Dial = func(context.Context, manifest.HostConfig) (transport.FS, error) { return &probeFS{deny: true}, nil }
	})
	testenv.SameTree(t, "the host after doctor", before, testenv.Tree(t, e.Dir))
	if rep.OK {
		t.Fatal("an inbox the account cannot archive in must fail doctor")
	}
	for _, c := range drFind(rep, "host canonical", "inbox") {
		drWant(t, c, doctor.CheckFail, "the account cannot archive here: cannot create an entry in "+c.Inbox.Path+": mkdir ")
		if !strings.Contains(c.Hint, "give the account write access to the inbox") {
			t.Errorf("hint %q does not say what to fix", c.Hint)
		}
	}
}

// TestDoctorArchiveProbe: on an inbox the account may archive in, doctor
// passes, and every probe directory it made (a dot-name, never a handoff's)
// was removed. Invariant: nothing is left behind on the host.
func TestDoctorArchiveProbe(t *testing.T) {
	e := newDrEnv(t, "")
	if err := os.MkdirAll(e.Inbox+"/processed", 0o755); err != nil {
		t.Fatal(err)
	}
	before := testenv.Tree(t, e.Dir)
	p := &probeFS{}
	rep := e.doctor(func(o *doctor.Options) {
		o.Dial = func(context.Context, manifest.HostConfig) (transport.FS, error) { return p, nil }
	})
	testenv.SameTree(t, "the host after doctor", before, testenv.Tree(t, e.Dir))
	for _, c := range drFind(rep, "host canonical", "inbox") {
		if c.Status == doctor.CheckFail {
			t.Errorf("inbox check failed: %+v", c)
		}
	}
	// Two inboxes, and processed/ in one of them.
	if len(p.made) != 3 || len(p.removed) != len(p.made) {
		t.Fatalf("made %q, removed %q; want 3 probes, each removed", p.made, p.removed)
	}
	for _, m := range p.made {
		base := m[strings.LastIndex(m, "/")+1:]
		if !strings.HasPrefix(base, ".handoff-doctor-probe-") {
			t.Errorf("probe %q is not a dot-name", m)
		}
	}
}
