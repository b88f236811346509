package prune

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
)

// BackupsResult says which backups Backups removed, or would remove in a
// dry run, and why others of their age stayed.
type BackupsResult struct {
	Files int      `json:"files"`
	Bytes int64    `json:"bytes"`
	Names []string `json:"names"` // file names in .handoff/backups
	// Open counts old backups kept because their plan is open: a crash
	// left it unfinished, and recovery reads them.
	Open int `json:"open"`
	// Newest counts old backups kept because each is its target's newest:
	// the one-step undo of what the target holds now.
	Newest int `json:"newest"`
}

// BackupsOptions select the backups Backups removes.
type BackupsOptions struct {
	Workspace string        // the workspace root
	Keep      time.Duration // a finished plan's backup older than this goes; must be positive
	Now       time.Time
	DryRun    bool // list what would go; remove nothing
}

// ErrBackupsDir is returned when .handoff or .handoff/backups is not a
// real directory (a symlink, say): Backups then removes nothing.
var ErrBackupsDir = errors.New("not a directory of this workspace")

// Backups removes from the workspace's .handoff/backups the plan backups
// (names as ingest.BackupName makes them) whose modification time is
// more than Keep before Now, except:
//   - a backup of an open plan (state planned: recovery reads it), or of
//     a target an open plan changes;
//   - the newest backup of each target, whatever its age: the undo of
//     the last change handoff made to it;
//   - anything else: another writer's late edit (late.*), the card
//     index's index.MEMORY.md, temporary files, whatever is not a
//     regular file.
//
// It opens .handoff and backups without following a symlink, and
// removes only entries directly in that directory. The caller holds the
// workspace lock.
func Backups(ctx context.Context, l *ledger.Ledger, opts BackupsOptions) (BackupsResult, error) {
	res := BackupsResult{Names: []string{}}
	if opts.Keep <= 0 {
		return res, errors.New("backups: keep must be positive")
	}
	dir, err := openBackups(opts.Workspace)
	if errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	defer dir.Close()

	open, err := l.OpenPlans(ctx)
	if err != nil {
		return res, fmt.Errorf("backups: %w", err)
	}
	keepSHA, keepTarget := map[string]bool{}, map[string]bool{}
	for _, p := range open {
		if b, ok := parseBackup(ingest.BackupName(p.SHA256, p.Replans, p.Target)); ok {
			keepSHA[b.sha12], keepTarget[b.target] = true, true
		}
	}

	ents, err := dir.ReadDir(-1)
	if err != nil {
		return res, fmt.Errorf("backups: list %s: %w", layout.BackupsDir, err)
	}
	type file struct {
		name  string
		mtime time.Time
		size  int64
		b     backupName
	}
	var files []file
	newest := map[string]time.Time{} // target hash -> its newest backup's mtime
	fd := int(dir.Fd())
	for _, e := range ents {
		b, ok := parseBackup(e.Name())
		if !ok {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return res, fmt.Errorf("backups: stat %s: %w", e.Name(), err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		f := file{name: e.Name(), mtime: time.Unix(st.Mtim.Unix()), size: st.Size, b: b}
		files = append(files, f)
		if n, ok := newest[b.target]; !ok || f.mtime.After(n) {
			newest[b.target] = f.mtime
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })

	cutoff := opts.Now.Add(-opts.Keep)
	removed := 0
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		switch {
		case !f.mtime.Before(cutoff):
			continue
		case keepSHA[f.b.sha12] || keepTarget[f.b.target]:
			res.Open++
			continue
		case !f.mtime.Before(newest[f.b.target]):
			res.Newest++
			continue
		}
		if !opts.DryRun {
			// unlinkat without AT_REMOVEDIR never removes a directory,
			// and removes a symlink itself, never what it names.
			if err := unix.Unlinkat(fd, f.name, 0); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return res, fmt.Errorf("backups: remove %s: %w", f.name, err)
			}
			removed++
		}
		res.Files++
		res.Bytes += f.size
		res.Names = append(res.Names, f.name)
	}
	if removed > 0 {
		if err := dir.Sync(); err != nil {
			return res, fmt.Errorf("backups: fsync %s: %w", layout.BackupsDir, err)
		}
	}
	return res, nil
}

// openBackups opens the workspace's .handoff/backups, refusing a
// symlink at .handoff or at backups (ErrBackupsDir). A workspace without
// one gets os.ErrNotExist.
func openBackups(ws string) (*os.File, error) {
	fd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("backups: open workspace: %w", &os.PathError{Op: "open", Path: ws, Err: err})
	}
	for _, name := range strings.Split(layout.BackupsDir, "/") {
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil, os.ErrNotExist
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			return nil, fmt.Errorf("backups: %s: %w (a symlink?); nothing removed", layout.BackupsDir, ErrBackupsDir)
		case err != nil:
			return nil, fmt.Errorf("backups: open %s: %w", layout.BackupsDir, err)
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), filepath.Join(ws, layout.BackupsDir)), nil
}

// backupName is a plan backup's name taken apart.
type backupName struct {
	sha12  string // the first 12 hex digits of the handoff's SHA-256
	target string // the 16 hex digits of the target's hash
}

// parseBackup takes apart a name ingest.BackupName makes:
// <sha12>.<replans>.<hash16>.<tail>. Anything else (late.*,
// index.MEMORY.md, a temporary file) is not a plan backup.
func parseBackup(name string) (backupName, bool) {
	parts := strings.SplitN(name, ".", 4)
	if len(parts) != 4 || !isHex(parts[0], 12) || !isHex(parts[2], 16) || parts[3] == "" {
		return backupName{}, false
	}
	if r := parts[1]; r == "" || len(r) > 9 || strings.Trim(r, "0123456789") != "" {
		return backupName{}, false
	}
	return backupName{sha12: parts[0], target: parts[2]}, true
}

// isHex reports whether s is n lowercase hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// BackupsEvery is how often RetainBackups looks at the backups: once a
// day, so that the timer's idle ticks pay one stat for it.
const BackupsEvery = 24 * time.Hour

// RetainBackups is Backups as sync runs it: at most once every
// BackupsEvery, by the modification time of layout.BackupsStamp, which it
// sets to now after each pass that ended without error. It reports
// whether it looked; keep 0 keeps every backup and never looks. A stamp
// in the future (a clock set back) does not hold it off. The caller
// holds the workspace lock.
func RetainBackups(ctx context.Context, l *ledger.Ledger, ws string, keep time.Duration, now time.Time) (BackupsResult, bool, error) {
	if keep <= 0 {
		return BackupsResult{Names: []string{}}, false, nil
	}
	stamp := filepath.Join(ws, layout.BackupsStamp)
	if fi, err := os.Lstat(stamp); err == nil && fi.Mode().IsRegular() {
		if age := now.Sub(fi.ModTime()); age >= 0 && age < BackupsEvery {
			return BackupsResult{Names: []string{}}, false, nil
		}
	}
	res, err := Backups(ctx, l, BackupsOptions{Workspace: ws, Keep: keep, Now: now})
	if err != nil {
		return res, true, err
	}
	return res, true, touch(ws, now)
}

// touch sets the stamp's modification time to now, creating it if need
// be, without following a symlink at .handoff or at the stamp. It need
// not survive a crash: a lost stamp costs one more pass.
func touch(ws string, now time.Time) error {
	dir, name := filepath.Split(layout.BackupsStamp)
	fd, err := unix.Open(filepath.Join(ws, dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("backups: stamp: %w", err)
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(layout.PrivateFile))
	if err != nil {
		return fmt.Errorf("backups: stamp %s: %w", layout.BackupsStamp, err)
	}
	defer unix.Close(f)
	ts := unix.NsecToTimespec(now.UnixNano())
	if err := unix.UtimesNanoAt(fd, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("backups: stamp %s: %w", layout.BackupsStamp, err)
	}
	return nil
}
