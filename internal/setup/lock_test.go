package setup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/handoff-sync/handoff/internal/layout"
)

// The lock file says who holds the lock (pid, command, since when), so
// that doctor and the exit-75 message can name the holder; a file of an
// earlier version (the pid alone) still reads.
func TestLockNamesItsHolder(t *testing.T) {
	ws := t.TempDir()
	before := time.Now().Add(-time.Second)
	unlock, err := lock(ws, false, "review edit 092d1437c453\x1b[2J")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, layout.LockFile)
	lk, err := ProbeLock(p)
	if err != nil {
		t.Fatal(err)
	}
	// This process holds it, through another descriptor: held.
	h := lk.Holder
	if !lk.Held || h.PID != os.Getpid() || h.What != "review edit 092d1437c453[2J" || h.Since.Before(before.Truncate(time.Second)) || !h.Editing() {
		t.Fatalf("probe: %+v", lk)
	}
	if _, err := lock(ws, false, "sync"); !errors.Is(err, ErrLocked) ||
		!strings.Contains(err.Error(), fmt.Sprintf(": `handoff review edit 092d1437c453[2J` (pid %d) since ", os.Getpid())) {
		t.Fatalf("second lock: %v", err)
	}
	unlock()

	// An earlier version's lock file: the pid alone.
	fl := flock.New(p)
	if ok, err := fl.TryLock(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	defer fl.Unlock()
	os.WriteFile(p, []byte("4242\n"), 0o600)
	lk, _ = ProbeLock(p)
	if lk.PID != 4242 || lk.Holder.What != "" || !lk.Holder.Since.IsZero() || lk.Holder.Describe() != "pid 4242" {
		t.Fatalf("old lock file: %+v, %q", lk, lk.Holder.Describe())
	}
}
