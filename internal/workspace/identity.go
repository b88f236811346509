package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/layout"
)

// FileVersion is the identity file format this package writes.
const FileVersion = 1

// Origins: how a workspace got its identity.
const (
	// OriginNew: `handoff init` made the directory.
	OriginNew = "new"
	// OriginAdopted: `handoff init` adopted a directory that was there,
	// as it was.
	OriginAdopted = "adopted"
	// OriginUpgraded: an earlier handoff made the workspace, and its
	// first run by this one gave it an identity.
	OriginUpgraded = "upgraded"
)

// maxFile bounds what Read reads: an identity file is under 200 bytes.
const maxFile = 4 << 10

var idPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Identity is a workspace's identity.
type Identity struct {
	ID        string    `json:"id"`         // 32 lowercase hex digits, random
	CreatedAt time.Time `json:"created_at"` // when it was given, UTC
	Origin    string    `json:"origin"`     // new | adopted | upgraded
}

// Short is the id's first 8 hex digits, for messages.
func (id Identity) Short() string {
	if len(id.ID) < 8 {
		return id.ID
	}
	return id.ID[:8]
}

// file is the identity file: .handoff/workspace.json.
type file struct {
	SchemaVersion int `json:"schema_version"`
	Identity
}

// New is a new identity with a random id, made at now.
func New(now time.Time, origin string) Identity {
	var b [16]byte
	rand.Read(b[:])
	return Identity{ID: hex.EncodeToString(b[:]), CreatedAt: now.UTC().Truncate(time.Second), Origin: origin}
}

// ErrNoIdentity means a directory has no workspace identity.
var ErrNoIdentity = errors.New("no workspace identity")

// MissingError is a directory that is no workspace: it has no identity
// and no ledger of an earlier handoff. Nothing was created there.
type MissingError struct {
	Path   string   // absolute
	Exists bool     // the directory exists
	Near   []string // workspaces near Path, nearest first (see Near)
}

func (e *MissingError) Error() string {
	if !e.Exists {
		return fmt.Sprintf("no workspace at %s: the directory does not exist", e.Path)
	}
	return fmt.Sprintf("%s is not a handoff workspace: it has no %s", e.Path, layout.IdentityFile)
}

func (e *MissingError) Unwrap() error { return ErrNoIdentity }

// Hint names the workspaces near the path, then how to make one there,
// one hint a line. With a workspace near, making one there is said to
// start a second, separate memory, and needs init's --new-memory.
func (e *MissingError) Hint() string {
	var lines []string
	for _, n := range e.Near {
		what := "a workspace"
		if id, err := Read(n); err == nil {
			what = fmt.Sprintf("a workspace (id %s)", id.Short())
		}
		lines = append(lines, fmt.Sprintf("%s has %s: if you meant it, fix `workspace:` in the manifest (or --workspace)", Tilde(n), what))
	}
	switch {
	case len(e.Near) > 0:
		// A workspace is near: the path is most likely a typo of it, and
		// a workspace made here would be a second memory beside it.
		lines = append(lines, fmt.Sprintf("only to start a second, separate memory there: handoff init --workspace %s --new-memory (handoffs synced into it never reach %s)",
			shellPath(e.Path), Tilde(e.Near[0])))
	case e.Exists:
		lines = append(lines, fmt.Sprintf("handoff init --workspace %s makes that directory a workspace, as it is: a memory of its own", shellPath(e.Path)))
	default:
		lines = append(lines, fmt.Sprintf("handoff init --workspace %s makes a new workspace there: a memory of its own", shellPath(e.Path)))
	}
	return strings.Join(lines, "\nhint: ")
}

// Error is a workspace whose identity cannot be trusted: an identity file
// that cannot be read, or one its ledger contradicts. Nothing was changed.
type Error struct {
	Path string // the workspace, absolute
	Err  error
	Fix  string // what to do
}

func (e *Error) Error() string { return fmt.Sprintf("workspace %s: %v", e.Path, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Hint says what to do.
func (e *Error) Hint() string { return e.Fix }

// Read returns the identity of the workspace at dir, writing nothing. A
// directory without an identity file (or no directory) is ErrNoIdentity,
// wrapped; one that cannot be read or parsed, a symlink included, is an
// *Error.
func Read(dir string) (Identity, error) {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Identity{}, fmt.Errorf("%s: %w", dir, ErrNoIdentity)
	}
	if err != nil {
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			return Identity{}, notDir(dir)
		}
		return Identity{}, &Error{Path: dir, Err: err, Fix: "make the workspace a directory readable by this user"}
	}
	defer root.Close()
	b, err := durable.ReadRegular(root, layout.IdentityFile, maxFile)
	if errors.Is(err, fs.ErrNotExist) {
		return Identity{}, fmt.Errorf("%s: %w", dir, ErrNoIdentity)
	}
	if err == nil {
		var id Identity
		if id, err = parse(b); err == nil {
			return id, nil
		}
	}
	return Identity{}, &Error{Path: dir, Err: fmt.Errorf("%s: %w", layout.IdentityFile, err),
		Fix: fmt.Sprintf("move %s aside (it must be a regular file) and run `handoff init --workspace %s`: it restores the id the ledger records",
			filepath.Join(dir, layout.IdentityFile), shellPath(dir))}
}

func parse(b []byte) (Identity, error) {
	var f file
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return Identity{}, fmt.Errorf("not valid JSON: %w", err)
	}
	switch {
	case f.SchemaVersion > FileVersion:
		return Identity{}, fmt.Errorf("schema_version %d is newer than this handoff (%d); upgrade handoff", f.SchemaVersion, FileVersion)
	case f.SchemaVersion != FileVersion:
		return Identity{}, fmt.Errorf("schema_version %d: want %d", f.SchemaVersion, FileVersion)
	case !idPattern.MatchString(f.ID):
		return Identity{}, fmt.Errorf("id %q is not 32 lowercase hex digits", f.ID)
	case f.CreatedAt.IsZero():
		return Identity{}, errors.New("created_at is missing")
	}
	return f.Identity, nil
}

// Marshal is the identity file's content for id.
func Marshal(id Identity) []byte {
	b, _ := json.MarshalIndent(file{SchemaVersion: FileVersion, Identity: id}, "", "  ")
	return append(b, '\n')
}

// Check is what a command that writes a workspace asks first; it writes
// nothing. It returns the workspace's identity; or, for a workspace an
// earlier handoff made (a ledger, no identity file), legacy true and no
// identity; or a *MissingError naming the workspaces near dir; or the
// *Error Read found.
func Check(dir string) (id Identity, legacy bool, err error) {
	id, err = Read(dir)
	if err == nil || !errors.Is(err, ErrNoIdentity) {
		return id, false, err
	}
	fi, serr := os.Stat(dir)
	exists := serr == nil && fi.IsDir()
	if serr == nil && !fi.IsDir() {
		return Identity{}, false, notDir(dir)
	}
	if exists && hasLedger(dir) {
		return Identity{}, true, nil
	}
	return Identity{}, false, &MissingError{Path: dir, Exists: exists, Near: Near(dir)}
}

func notDir(dir string) *Error {
	return &Error{Path: dir, Err: errors.New("not a directory"),
		Fix: "point the manifest's workspace (or --workspace) at a directory, or at a path that does not exist yet for `handoff init` to make"}
}

// hasLedger reports whether dir holds an earlier handoff's ledger.
func hasLedger(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(layout.LedgerFile)))
	return err == nil && fi.Mode().IsRegular()
}

// Has reports whether dir is a workspace: it has an identity file, or the
// ledger of an earlier handoff.
func Has(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(layout.IdentityFile)))
	return (err == nil && fi.Mode().IsRegular()) || hasLedger(dir)
}

// Establish gives the workspace at dir an identity unless it has one,
// and reports whether it did. The directory and its .handoff exist, and
// the caller holds the workspace lock. The identity is the one the
// ledger records, when it records one (a run stopped between the ledger
// and the file), else a new one made at now with origin. It is recorded
// in the ledger (which is created or migrated as needed) before the
// identity file is written, durably; the file comes last.
func Establish(ctx context.Context, dir, origin string, now time.Time) (Identity, bool, error) {
	id, err := Read(dir)
	if err == nil || !errors.Is(err, ErrNoIdentity) {
		return id, false, err
	}
	led, err := ledger.Open(filepath.Join(dir, filepath.FromSlash(layout.LedgerFile)))
	if err != nil {
		return Identity{}, false, err
	}
	defer led.Close()
	rec, ok, err := led.Identity(ctx)
	if err != nil {
		return Identity{}, false, err
	}
	if ok {
		id = Identity{ID: rec.ID, CreatedAt: rec.CreatedAt.UTC(), Origin: rec.Origin}
	} else {
		id = New(now, origin)
		if err := led.RecordIdentity(ctx, ledger.Identity{ID: id.ID, CreatedAt: id.CreatedAt, Origin: id.Origin}); err != nil {
			return Identity{}, false, err
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Identity{}, false, err
	}
	defer root.Close()
	if err := durable.WriteFile(root, layout.IdentityFile, Marshal(id), 0o600); err != nil {
		return Identity{}, false, fmt.Errorf("workspace %s: write its identity: %w", dir, err)
	}
	return id, true, nil
}

// Reconcile makes sure the ledger at dir records id: one that records
// none (a ledger made before identities, or one moved aside and made
// anew) is given it; one that records another is an *Error, and nothing
// is changed. The caller holds the workspace lock.
func Reconcile(ctx context.Context, dir string, id Identity) error {
	led, err := ledger.Open(filepath.Join(dir, filepath.FromSlash(layout.LedgerFile)))
	if err != nil {
		return err
	}
	defer led.Close()
	rec, ok, err := led.Identity(ctx)
	switch {
	case err != nil:
		return err
	case ok && rec.ID == id.ID:
		return nil
	case ok:
		return Mismatch(dir, id.ID, rec.ID)
	}
	return led.RecordIdentity(ctx, ledger.Identity{ID: id.ID, CreatedAt: id.CreatedAt, Origin: id.Origin})
}

// Mismatch is the *Error of a workspace at dir whose identity file names
// fileID while its ledger records ledgerID.
func Mismatch(dir, fileID, ledgerID string) *Error {
	return &Error{Path: dir, Err: fmt.Errorf("%s names workspace %s, but its ledger belongs to workspace %s", layout.IdentityFile, fileID, ledgerID),
		Fix: fmt.Sprintf("the ledger or the identity file was copied from another workspace: put back the identity file whose id is %s (a backup of %s), or move %s aside to start this workspace's ledger afresh",
			ledgerID, filepath.Join(dir, layout.IdentityFile), filepath.Join(dir, layout.LedgerFile))}
}

// Tilde writes p with the home directory as ~, as a manifest would.
func Tilde(p string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" {
		return p
	}
	home = filepath.Clean(home)
	if p == home {
		return "~"
	}
	if rest, ok := strings.CutPrefix(p, home+string(filepath.Separator)); ok {
		return "~/" + rest
	}
	return p
}

// shellPath is p as a shell word: with ~ when that needs no quoting, else
// the absolute path, quoted when it must be.
func shellPath(p string) string {
	plain := func(s string) bool {
		return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-~+,:@") == ""
	}
	if t := Tilde(p); plain(t) {
		return t
	}
	if plain(p) {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}
