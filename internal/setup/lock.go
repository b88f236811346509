package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/workspace"
)

// ErrLocked means another run holds the workspace lock.
var ErrLocked = errors.New("another handoff run holds the workspace lock")

// Holder is what the lock file says of the process that holds the lock:
// its pid, then the command it runs ("sync", "review edit 3f2a9c81d0e4"),
// then when it took the lock (RFC 3339), a line each. A file written by an
// earlier version holds only the pid.
type Holder struct {
	PID   int
	What  string    // "" when the file does not say
	Since time.Time // zero when the file does not say
}

// maxHolder bounds what is read of a lock file.
const maxHolder = 512

func parseHolder(b []byte) Holder {
	lines := strings.Split(string(b), "\n")
	var h Holder
	h.PID, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	if len(lines) > 1 {
		h.What = cleanWhat(lines[1])
	}
	if len(lines) > 2 {
		h.Since, _ = time.Parse(time.RFC3339, strings.TrimSpace(lines[2]))
	}
	return h
}

// cleanWhat keeps a command's description to one short printable line.
func cleanWhat(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
	if r := []rune(s); len(r) > 100 {
		s = string(r[:100])
	}
	return s
}

// Describe says who holds the lock, as people read it:
// "`handoff review edit 3f2a9c81d0e4` (pid 4242) since 14:05".
func (h Holder) Describe() string {
	var s string
	switch {
	case h.What != "" && h.PID > 0:
		s = fmt.Sprintf("`handoff %s` (pid %d)", h.What, h.PID)
	case h.What != "":
		s = "`handoff " + h.What + "`"
	case h.PID > 0:
		s = fmt.Sprintf("pid %d", h.PID)
	default:
		s = "a process that did not write its pid"
	}
	if !h.Since.IsZero() {
		since := h.Since.Local()
		if time.Since(since) < 20*time.Hour {
			s += " since " + since.Format("15:04")
		} else {
			s += " since " + since.Format("2006-01-02 15:04")
		}
	}
	return s
}

// Editing reports whether the holder is a person's `handoff review edit`,
// which holds the lock while their editor is open.
func (h Holder) Editing() bool { return strings.HasPrefix(h.What, "review edit") }

// Lock is how every command that writes a workspace starts. It refuses a
// directory that is no workspace (a *workspace.MissingError naming the
// workspaces near it) before anything is created, takes the workspace
// lock (flock on .handoff/lock) without waiting (ErrLocked, naming the
// holder, when another run has it), and then, unless a dry run,
// gives a workspace made by an earlier handoff its identity, or makes
// sure the ledger records the one it has. It returns the identity (none
// for an earlier handoff's workspace in a dry run) and the func that lets
// go. An applied run creates the lock file and writes into it its pid,
// what (the command, without "handoff ", such as "sync" or "review edit
// 3f2a9c81d0e4") and the time (see Holder), for doctor and for the
// exit-75 message; a dry run locks only an existing lock file, so it
// creates nothing.
func Lock(ws string, dryRun bool, what string) (workspace.Identity, func(), error) {
	id, legacy, err := workspace.Check(ws)
	if err != nil {
		return workspace.Identity{}, nil, err
	}
	unlock, err := lock(ws, dryRun, what)
	if err != nil {
		return workspace.Identity{}, nil, err
	}
	if dryRun {
		return id, unlock, nil
	}
	ctx := context.Background()
	if legacy {
		id, _, err = workspace.Establish(ctx, ws, workspace.OriginUpgraded, time.Now())
	} else {
		err = workspace.Reconcile(ctx, ws, id)
	}
	if err != nil {
		unlock()
		return workspace.Identity{}, nil, err
	}
	return id, unlock, nil
}

// lock takes the workspace lock; see Lock.
func lock(ws string, dryRun bool, what string) (func(), error) {
	path := filepath.Join(ws, layout.LockFile)
	if dryRun {
		if _, err := os.Stat(path); err != nil {
			return func() {}, nil
		}
	} else if err := durable.MkdirAllPath(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", ws, err)
	}
	fl := flock.New(path)
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		if b, err := readHead(path); err == nil {
			if h := parseHolder(b); h.PID > 0 || h.What != "" {
				return nil, fmt.Errorf("%w: %s (%s)", ErrLocked, h.Describe(), path)
			}
		}
		return nil, fmt.Errorf("%w (%s)", ErrLocked, path)
	}
	if !dryRun {
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
			fmt.Fprintf(f, "%d\n%s\n%s\n", os.Getpid(), cleanWhat(what), time.Now().UTC().Format(time.RFC3339))
			f.Close()
		}
	}
	return func() { fl.Unlock() }, nil
}

// LockProbe is what ProbeLock found.
type LockProbe struct {
	Exists  bool
	Held    bool // by another process
	PID     int  // the pid in the file, 0 if none
	Holder  Holder
	Release func()
}

// ProbeLock tries to take the lock file p shared without blocking, without
// creating it. When it succeeds, Release lets go; no run can start until
// then. Readers (doctor, where) use it to read a ledger no run is writing.
func ProbeLock(p string) (LockProbe, error) {
	lk := LockProbe{Release: func() {}}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return lk, nil
	}
	if err != nil {
		return lk, err
	}
	lk.Exists = true
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		lk.Held = true
		b, _ := io.ReadAll(io.LimitReader(f, maxHolder))
		lk.Holder = parseHolder(b)
		lk.PID = lk.Holder.PID
		f.Close()
		return lk, nil
	}
	if err != nil {
		f.Close()
		return lk, err
	}
	var once sync.Once
	lk.Release = func() { once.Do(func() { f.Close() }) } // closing drops the flock
	return lk, nil
}

// readHead reads the start of the lock file p, not following a symlink.
func readHead(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxHolder))
}

// PIDAlive reports whether a process with this pid exists.
func PIDAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
