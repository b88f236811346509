// Package testenv holds what tests across packages build their worlds
// from: handoff fixtures, a canonical host with two repositories and a
// workspace, and tree snapshots that show whether anything was written.
//
// Guarantees: everything it creates is under the test's own temporary
// directory; a snapshot covers every file, directory and symlink below its
// root, so equal snapshots mean nothing there was created, removed or
// changed.
package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/transport"
)

// Handoff renders a handoff from section name and body pairs.
func Handoff(pairs ...string) string {
	var b strings.Builder
	b.WriteString("# Memory Handoff\n\n")
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(&b, "## %s\n%s\n\n", pairs[i], pairs[i+1])
	}
	return b.String()
}

// Doc is a document update of target with text.
func Doc(target, text string) string {
	return Handoff("Type", "workflow", "Title", "t", "Summary", "s", "Recommended memory action", "no-card",
		"Target document", target, "Suggested document content", text)
}

// Card is a create-card of name whose card holds body under valid front
// matter.
func Card(name, body string) string {
	return Handoff("Type", "setup", "Title", "t", "Summary", "s", "Recommended memory action", "create-card",
		"Target card", name, "Suggested card content", "---\ntopic: x\ncategory: c\ntags: [a]\n---\n"+body)
}

// RealTempDir is t.TempDir with every symlink resolved, so that paths the
// code under test reports compare equal to the ones the test builds.
func RealTempDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Sum is the hex SHA-256 of s.
func Sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Tree maps every path under root to its type and content hash.
func Tree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "symlink " + target
		case d.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file " + Sum(string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SameTree reports every difference between two Trees as an error.
func SameTree(t testing.TB, what string, before, after map[string]string) {
	t.Helper()
	if maps.Equal(before, after) {
		return
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %s was %q, now %q", what, k, v, after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s appeared (%s)", what, k, v)
		}
	}
}

// Env is a workspace (made as `handoff init` makes one) and one local
// host, canonical, with two repositories, app and lib, each with an
// inbox, all under one temporary directory, and a manifest naming them
// (settle 0s).
type Env struct {
	T        testing.TB
	Dir      string
	WS       string
	Inbox    string // repos/app/.claude/memory-handoffs
	Inbox2   string // repos/lib/.codex/memory-handoffs
	Manifest string // the manifest's path
	M        *manifest.Manifest
}

// NewEnv builds an Env; extra is appended to the manifest after the
// canonical host's entry (more keys for it, or more hosts).
func NewEnv(t testing.TB, extra string) *Env {
	t.Helper()
	e := NewEnvNoWorkspace(t, extra)
	// Every command that writes refuses a directory without an identity:
	// make the workspace as `handoff init` does.
	if _, _, err := setup.Init(context.Background(), e.WS, time.Now()); err != nil {
		t.Fatal(err)
	}
	return e
}

// NewEnvNoWorkspace is NewEnv before `handoff init`: the workspace
// directory does not exist.
func NewEnvNoWorkspace(t testing.TB, extra string) *Env {
	t.Helper()
	t.Setenv("XDG_RUNTIME_DIR", "") // no systemd user session: a known timer check
	dir := t.TempDir()
	e := &Env{T: t, Dir: dir, WS: filepath.Join(dir, "ws"),
		Inbox:    filepath.Join(dir, "repos/app/.claude/memory-handoffs"),
		Inbox2:   filepath.Join(dir, "repos/lib/.codex/memory-handoffs"),
		Manifest: filepath.Join(dir, "writers.yaml")}
	for _, d := range []string{e.Inbox, e.Inbox2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	yml := fmt.Sprintf("version: 1\nworkspace: %s\ndefaults: {settle: 0s}\nhosts:\n  - name: canonical\n    transport: local\n    discover: [{root: %s, max_depth: 2}]\n%s",
		e.WS, filepath.Join(dir, "repos"), extra)
	if err := os.WriteFile(e.Manifest, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(e.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	e.M = m
	return e
}

// Put writes a handoff into inbox.
func (e *Env) Put(inbox, name, content string) {
	e.T.Helper()
	if err := os.WriteFile(filepath.Join(inbox, name), []byte(content), 0o644); err != nil {
		e.T.Fatal(err)
	}
}

// TreeHash hashes every path under dir with its mode, modification time
// and content (a symlink's target): equal hashes mean nothing there was
// created, removed, changed or even touched.
func TreeHash(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	var paths []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	sort.Strings(paths)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %v %d\n", p, fi.Mode(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			fmt.Fprintf(h, "-> %s\n", l)
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DownFleet is a manifest of n local hosts, h0 to h(n-1), for the
// workspace ws, each with one inbox that does not exist; manifestDir is
// where its writers.yaml is said to be.
func DownFleet(t testing.TB, ws, manifestDir string, n int) *manifest.Manifest {
	t.Helper()
	var yml strings.Builder
	fmt.Fprintf(&yml, "version: 1\nworkspace: %s\nhosts:\n", ws)
	for i := range n {
		fmt.Fprintf(&yml, "  - name: h%d\n    transport: local\n    inboxes: [/nonexistent/h%d/.claude/memory-handoffs]\n", i, i)
	}
	m, err := manifest.Parse([]byte(yml.String()), filepath.Join(manifestDir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// HeldDial is a setup.Dialer that counts the hosts dialling at once: each
// dial waits until Release is closed (or its context ends) and then fails
// with "down". A test reads Dialing once every dial that can start has
// (synctest.Wait), to see how many hosts a command works on at once.
type HeldDial struct {
	Dialing atomic.Int64
	Release chan struct{}
}

// NewHeldDial returns a HeldDial whose dials wait.
func NewHeldDial() *HeldDial { return &HeldDial{Release: make(chan struct{})} }

// Dial counts the dial, waits, and fails.
func (d *HeldDial) Dial(ctx context.Context, _ manifest.HostConfig) (transport.FS, error) {
	d.Dialing.Add(1)
	select {
	case <-d.Release:
	case <-ctx.Done():
	}
	return nil, errors.New("down")
}
