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

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/workspace"
)

// ErrLocked means another run holds the workspace lock.
var ErrLocked = errors.New("another handoff run holds the workspace lock")

// Lock is how every command that writes a workspace starts. It refuses a
// directory that is no workspace (a *workspace.MissingError naming the
// workspaces near it) before anything is created, takes the workspace
// lock (flock on .handoff/lock) without waiting (ErrLocked, with the
// holder's pid, when another run has it), and then, unless a dry run,
// gives a workspace made by an earlier handoff its identity, or makes
// sure the ledger records the one it has. It returns the identity (none
// for an earlier handoff's workspace in a dry run) and the func that lets
// go. An applied run creates the lock file and writes its pid into it; a
// dry run locks only an existing lock file, so it creates nothing.
func Lock(ws string, dryRun bool) (workspace.Identity, func(), error) {
	id, legacy, err := workspace.Check(ws)
	if err != nil {
		return workspace.Identity{}, nil, err
	}
	unlock, err := lock(ws, dryRun)
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
func lock(ws string, dryRun bool) (func(), error) {
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
		pid := ""
		if b, err := os.ReadFile(path); err == nil {
			pid = strings.TrimSpace(string(b))
		}
		if pid != "" {
			return nil, fmt.Errorf("%w (pid %s, %s)", ErrLocked, pid, path)
		}
		return nil, fmt.Errorf("%w (%s)", ErrLocked, path)
	}
	if !dryRun {
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
			f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
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
		b, _ := io.ReadAll(io.LimitReader(f, 32))
		lk.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
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

// PIDAlive reports whether a process with this pid exists.
func PIDAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
