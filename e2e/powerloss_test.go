package e2e

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	binenc "encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/testkit/fsrecord"
)

// TestPowerLoss runs one sync of the mixed fixture under strace, then
// proves from the recorded system calls that durability follows from the
// protocol and not from luck:
//
//   - SpoolRecordArchive (a, b): a source's exact bytes reach the ledger's
//     write-ahead log in the commit that records it (or an earlier one, for
//     a content stored before), and that commit is fsynced before the
//     source is archived on its host; nothing is created under the legacy
//     spool directory (one durable write a batch, not a file a handoff).
//   - PlanBackupTarget (c): per applied plan, the plan is committed before
//     the target is replaced; the backup is fsynced, renamed and its
//     directory fsynced before that; the target's temporary is fsynced
//     before its rename and the target's directory is fsynced before the
//     result is committed. Review drafts likewise. A plan's write may be
//     the rename of a later plan's content on the same target, made on top
//     of it (a batch writes a target once, for a chain of appends).
//   - Receipt (d): receipts are fsynced, renamed, and their directory
//     fsynced before the run's row points at them.
//   - Confined: nothing is created, opened for writing, renamed or removed
//     outside the workspace, except the archive renames inside inboxes.
//   - EveryPowerCut: the trace is replayed against a forgetful file system
//     (internal/testkit/fsrecord: file data survives only once fsynced,
//     directory entries only once the directory is fsynced) and after every
//     single call the state a power cut would leave is checked: no archived
//     handoff whose bytes or source would be lost from the ledger, no durably
//     recorded result whose write is lost, no applied write without a
//     durable plan (the next run would apply it twice), no replaced target
//     without its durable backup, no receipt path pointing at nothing.
//   - EveryPowerCutNewDirectories: the same, counting a new directory as
//     durable only once its parent is fsynced (a known bug: see the skip).
func TestPowerLoss(t *testing.T) {
	if !fsrecord.Available() {
		if os.Getenv("HANDOFF_E2E_REQUIRED") != "" {
			t.Fatal("strace is not installed and HANDOFF_E2E_REQUIRED is set (apt-get install -y strace)")
		}
		t.Skip("strace is not installed")
	}
	w := newWorld(t)
	markers := w.mixed()
	pre := plSnapshot(t, w.dir)
	traceFile := filepath.Join(t.TempDir(), "trace.txt")
	cmd := exec.Command(binary(), "sync", "--manifest", w.manifest)
	cmd.Env = os.Environ()
	start := time.Now()
	out, err := fsrecord.Wrap(cmd, traceFile).CombinedOutput()
	if err != nil {
		t.Fatalf("sync under strace: %v\n%s", err, out)
	}
	took := time.Since(start)
	w.checkConverged(markers, mixedResults)
	ops, err := fsrecord.ParseFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	a := plAnalyze(t, w, ops, pre)
	t.Logf("traced sync took %v; %d calls recorded, %d fsyncs, %d renames; %d sources, %d plans",
		took.Round(time.Millisecond), len(ops), a.count(fsrecord.Op.IsSync), a.count(fsrecord.Op.IsRename), len(a.sources), len(a.plans))

	t.Run("SpoolRecordArchive", a.checkSpool)
	t.Run("PlanBackupTarget", a.checkTargets)
	t.Run("Receipt", a.checkReceipt)
	t.Run("Confined", a.checkConfined)
	t.Run("EveryPowerCut", func(t *testing.T) {
		for _, v := range a.replay(t, false, true) {
			t.Error(v)
		}
	})
	t.Run("EveryPowerCutNewDirectories", func(t *testing.T) {
		v := a.replay(t, true, false)
		for _, x := range v {
			t.Error(x)
		}
	})
}

// plSource is one stored source as the ledger has it.
type plSource struct {
	host, inbox, name, sha, archivedAs string
	content                            string // its bytes, as the inbox held them
}

// pattern is the run of bytes the source's row puts in a SQLite page:
// host, inbox, name and archived_as are adjacent columns.
func (s plSource) pattern() string { return s.host + s.inbox + s.name + s.archivedAs }

func (s plSource) label() string { return s.name }

type plPlan struct {
	sha, kind, action, target, before, after string
	replans                                  int
}

// pattern: kind, action, target, before_sha256, after_sha256 are adjacent.
func (p plPlan) pattern() string { return p.kind + p.action + p.target + p.before + p.after }

type plResult struct {
	sha, result, reason, action, target, before, after string
}

// pattern: result, reason, action, target, before and after are adjacent
// in the handoffs row (the bookkeeping commit).
func (r plResult) pattern() string {
	return r.result + r.reason + r.action + r.target + r.before + r.after
}

type plAnalysis struct {
	t        *testing.T
	w        *world
	ops      []fsrecord.Op
	pre      map[string][]byte // regular files before the run
	spoolDir string
	wal, db  string
	sources  []plSource
	plans    []plPlan
	results  []plResult
	receipt  string // absolute path of the run's receipt
	final    map[string][]byte
	// commit maps a row pattern to the index of the WAL fsync that first
	// made a commit holding it durable (syntactically: the first fsync of
	// the WAL that started after the commit frame of the first
	// transaction that carries it was written).
	commit map[string]int
	// renamed maps a rename's index to the SHA-256 of the content it put
	// in place.
	renamed map[int]string
}

func plSnapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = b
		}
		return nil
	})
	return out
}

func plHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func plAnalyze(t *testing.T, w *world, ops []fsrecord.Op, pre map[string][]byte) *plAnalysis {
	t.Helper()
	a := &plAnalysis{t: t, w: w, ops: ops, pre: pre, spoolDir: filepath.Join(w.ws, ".handoff/spool"),
		wal: filepath.Join(w.ws, ".handoff/ledger.db-wal"), db: filepath.Join(w.ws, ".handoff/ledger.db"),
		commit: map[string]int{}, renamed: map[int]string{}}
	db, err := sql.Open("sqlite", a.db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT host, inbox, name, sha256, archived_as FROM sources ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s plSource
		rows.Scan(&s.host, &s.inbox, &s.name, &s.sha, &s.archivedAs)
		b, ok := pre[filepath.Join(s.inbox, s.name)]
		if !ok || plHash(b) != s.sha {
			t.Fatalf("%s: the ledger's source has no matching file before the run", s.name)
		}
		s.content = string(b)
		a.sources = append(a.sources, s)
	}
	rows.Close()
	rows, err = db.Query(`SELECT sha256, kind, action, target, before_sha256, after_sha256, replans FROM plans WHERE state = 'done' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p plPlan
		rows.Scan(&p.sha, &p.kind, &p.action, &p.target, &p.before, &p.after, &p.replans)
		a.plans = append(a.plans, p)
	}
	rows.Close()
	rows, err = db.Query(`SELECT sha256, result, reason, action, target, before_sha256, after_sha256 FROM handoffs`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r plResult
		rows.Scan(&r.sha, &r.result, &r.reason, &r.action, &r.target, &r.before, &r.after)
		a.results = append(a.results, r)
	}
	rows.Close()
	if err := db.QueryRow(`SELECT receipt FROM runs WHERE mode = 'apply' ORDER BY started_at DESC LIMIT 1`).Scan(&a.receipt); err != nil {
		t.Fatal(err)
	}
	if len(a.sources) != len(mixedResults) || len(a.plans) != 7 {
		t.Fatalf("ledger holds %d sources and %d done plans; the fixture makes %d and 7", len(a.sources), len(a.plans), len(mixedResults))
	}
	a.final = plSnapshot(t, w.dir)

	// Syntactic commit points. A fixture handoff fits in one page, so its
	// bytes are one run in the WAL frame that stores them.
	var patterns []string
	for _, s := range a.sources {
		patterns = append(patterns, s.pattern(), s.content)
	}
	for _, p := range a.plans {
		patterns = append(patterns, p.pattern())
	}
	for _, r := range a.results {
		patterns = append(patterns, r.pattern())
	}
	patterns = append(patterns, a.receipt)
	// A row is committed once the commit frame of its transaction is
	// written: SQLite writes a frame's 24-byte header, then its page, and
	// a commit frame's header holds the database size (bytes 4-7) where
	// other frames hold 0. The commit point is then the first fsync of
	// the WAL that started after that write returned: only an fsync
	// started later is sure to cover it. Another connection's fsync (a
	// checkpoint's) can come in the middle of a transaction's frames, or
	// be under way while they are written; counting either made this test
	// depend on the machine's load.
	pending := map[string]bool{}  // in frames of a transaction not yet committed
	committed := map[string]int{} // pattern: the log line where its commit frame's write returned
	commitFrame := false          // the last header written was a commit frame's
	for i, o := range ops {
		if o.Call == "pwrite64" && o.Path == a.wal && o.Ret > 0 {
			if o.Ret == 24 && len(o.Data) == 24 {
				commitFrame = binenc.BigEndian.Uint32(o.Data[4:8]) != 0
				continue
			}
			for _, p := range patterns {
				if _, done := committed[p]; !done && bytes.Contains(o.Data, []byte(p)) {
					pending[p] = true
				}
			}
			if commitFrame {
				for p := range pending {
					committed[p] = o.Done
				}
				clear(pending)
				commitFrame = false
			}
		}
		if o.IsSync() && o.Path == a.wal {
			for p, done := range committed {
				if _, ok := a.commit[p]; !ok && o.Line > done {
					a.commit[p] = i
				}
			}
		}
	}
	for _, p := range patterns {
		if _, ok := a.commit[p]; !ok {
			t.Fatalf("no WAL commit carries the row %q: the trace or the row layout is not what this test expects", p)
		}
	}

	// What each rename put in place.
	m := fsrecord.NewModel()
	m.NewDirsDurable = true
	for p, b := range pre {
		m.Seed(p, b)
	}
	for i, o := range ops {
		if o.IsRename() {
			if data, ok, known := m.Volatile(o.Path); ok && known {
				a.renamed[i] = plHash(data)
			}
		}
		m.Apply(o)
	}
	return a
}

func (a *plAnalysis) count(f func(fsrecord.Op) bool) int {
	n := 0
	for _, o := range a.ops {
		if f(o) {
			n++
		}
	}
	return n
}

// find returns the index of the first op at or after from that matches,
// or -1.
func (a *plAnalysis) find(from int, f func(fsrecord.Op) bool) int {
	for i := max(from, 0); i < len(a.ops); i++ {
		if f(a.ops[i]) {
			return i
		}
	}
	return -1
}

// before reports whether op i finished before op j started.
func (a *plAnalysis) before(i, j int) bool {
	return i >= 0 && j >= 0 && a.ops[i].Done < a.ops[j].Line
}

func (a *plAnalysis) at(i int) string {
	if i < 0 {
		return "(never)"
	}
	return a.ops[i].String()
}

// renameInto finds the rename that put content hashing to sha at dst.
func (a *plAnalysis) renameInto(dst, sha string) int {
	for i, o := range a.ops {
		if o.IsRename() && o.Path2 == dst && (sha == "" || a.renamed[i] == sha) {
			return i
		}
	}
	return -1
}

// checkDurableWrite checks one durable.WriteFile that ended in rename r:
// the temporary was created, written and fsynced before the rename, and
// the directory was fsynced after it. It returns the directory fsync.
func (a *plAnalysis) checkDurableWrite(t *testing.T, what string, r int) int {
	t.Helper()
	tmp := a.ops[r].Path
	if !durable.IsTemp(path.Base(tmp)) {
		t.Errorf("%s: renamed from %s, not from a temporary file", what, tmp)
	}
	created := -1
	for i := r - 1; i >= 0; i-- {
		if a.ops[i].Creates() && a.ops[i].Path == tmp {
			created = i
			break
		}
	}
	if created < 0 || !strings.Contains(a.ops[created].Flags, "O_EXCL") {
		t.Errorf("%s: temporary %s not created with O_EXCL: %s", what, tmp, a.at(created))
	}
	lastWrite := created
	synced := -1
	for i := created + 1; i < r; i++ {
		o := a.ops[i]
		if o.Path != tmp {
			continue
		}
		if o.Call == "write" || o.Call == "pwrite64" {
			lastWrite, synced = i, -1
		}
		if o.IsSync() {
			synced = i
		}
	}
	if synced < 0 || !a.before(lastWrite, synced) || !a.before(synced, r) {
		t.Errorf("%s: temporary %s not fsynced after its last write and before its rename\n  last write: %s\n  rename:     %s", what, tmp, a.at(lastWrite), a.at(r))
	}
	dir := path.Dir(a.ops[r].Path2)
	ds := a.find(r+1, func(o fsrecord.Op) bool { return o.IsSync() && o.Path == dir })
	if ds < 0 || !a.before(r, ds) {
		t.Errorf("%s: directory %s never fsynced after the rename %s", what, dir, a.at(r))
	}
	return ds
}

func (a *plAnalysis) checkSpool(t *testing.T) {
	firstArchive := -1
	for _, o := range a.ops {
		if o.Writes() && (strings.HasPrefix(o.Path, a.spoolDir) || strings.HasPrefix(o.Path2, a.spoolDir)) {
			t.Errorf("the run wrote under the legacy spool directory: %s", o)
		}
	}
	for _, s := range a.sources {
		rec, stored := a.commit[s.pattern()], a.commit[s.content]
		arch := a.find(0, func(o fsrecord.Op) bool {
			return o.IsRename() && o.Path == filepath.Join(s.inbox, s.name) && o.Path2 == filepath.Join(s.inbox, s.archivedAs)
		})
		if arch < 0 {
			t.Errorf("%s: never archived to %s", s.label(), s.archivedAs)
			continue
		}
		if firstArchive < 0 || arch < firstArchive {
			firstArchive = arch
		}
		if stored > rec {
			t.Errorf("%s: (a) its bytes reach the ledger after the commit recording it\n  bytes:  %s\n  record: %s", s.label(), a.at(stored), a.at(rec))
		}
		if !a.before(stored, arch) {
			t.Errorf("%s: (a) the commit holding its bytes does not precede the archive rename\n  commit:  %s\n  archive: %s", s.label(), a.at(stored), a.at(arch))
		}
		if !a.before(rec, arch) {
			t.Errorf("%s: (b) the ledger commit recording the source does not precede its archive rename\n  commit:  %s\n  archive: %s", s.label(), a.at(rec), a.at(arch))
		}
	}
	// (b) in its plainest form: some WAL commit carrying sources is
	// durable before the very first archive rename.
	firstRec := len(a.ops)
	for _, s := range a.sources {
		firstRec = min(firstRec, a.commit[s.pattern()])
	}
	if firstArchive < 0 || !a.before(firstRec, firstArchive) {
		t.Errorf("(b) the first archive rename %s is not preceded by a WAL commit recording sources (%s)", a.at(firstArchive), a.at(firstRec))
	}
}

func (a *plAnalysis) result(sha string) (plResult, bool) {
	for _, r := range a.results {
		if r.sha == sha {
			return r, true
		}
	}
	return plResult{}, false
}

func (a *plAnalysis) backupPath(p plPlan) string {
	return filepath.Join(a.w.ws, ".handoff/backups", ingest.BackupName(p.sha, p.replans, p.target))
}

// chain returns plan i and the plans after it made on top of it, in order:
// later plans on the same target whose before-hash is the previous one's
// after-hash. A batch writes a target once, with what the last of a chain
// leaves (documents grow with every append, so a chain never repeats).
func (a *plAnalysis) chain(i int) []plPlan {
	c := []plPlan{a.plans[i]}
	for _, q := range a.plans[i+1:] {
		if last := c[len(c)-1]; q.target == last.target && q.before == last.after {
			c = append(c, q)
		}
	}
	return c
}

// afters is the set of target hashes that show plan i's write happened:
// its own after-hash and that of every plan of its chain.
func (a *plAnalysis) afters(i int) map[string]bool {
	m := map[string]bool{}
	for _, q := range a.chain(i) {
		m[q.after] = true
	}
	return m
}

// held reports whether target held content of hash sum at some point of
// the run: before it, or put there by a rename. A plan made on such content
// needs a backup of it; one made on what an earlier plan of its chain
// leaves, which the batch never wrote on its own, needs none.
func (a *plAnalysis) held(target, sum string) bool {
	if sum == "" {
		return false
	}
	if b, ok := a.pre[target]; ok && plHash(b) == sum {
		return true
	}
	return a.renameInto(target, sum) >= 0
}

func (a *plAnalysis) checkTargets(t *testing.T) {
	for i, p := range a.plans {
		target := filepath.Join(a.w.ws, p.target)
		r, ok := a.result(p.sha)
		if !ok {
			t.Errorf("plan for %s has no result row", p.target)
			continue
		}
		// The rename that made p's write: of p's content, or of the
		// content a later plan of its chain leaves.
		tr := -1
		for _, q := range a.chain(i) {
			if j := a.renameInto(target, q.after); j >= 0 && (tr < 0 || j < tr) {
				tr = j
			}
		}
		if tr < 0 {
			t.Errorf("%s: no rename put the planned content (after %s, or a later plan's of its chain) in place", p.target, p.after[:12])
			continue
		}
		planCommit, book := a.commit[p.pattern()], a.commit[r.pattern()]
		if !a.before(planCommit, tr) {
			t.Errorf("%s: (c) plan commit does not precede the target rename\n  plan commit: %s\n  rename:      %s", p.target, a.at(planCommit), a.at(tr))
		}
		if a.held(target, p.before) {
			bp := a.backupPath(p)
			br := a.renameInto(bp, p.before)
			if br < 0 {
				t.Errorf("%s: (c) no backup holding the prior content (%s) was written to %s", p.target, p.before[:12], bp)
			} else {
				bds := a.checkDurableWrite(t, "backup of "+p.target, br)
				if !a.before(bds, tr) {
					t.Errorf("%s: (c) backup directory fsync does not precede the target rename\n  dir fsync: %s\n  rename:    %s", p.target, a.at(bds), a.at(tr))
				}
				if !a.before(planCommit, br) {
					t.Errorf("%s: (c) backup written before the plan was committed", p.target)
				}
			}
		}
		tds := a.checkDurableWrite(t, "target "+p.target, tr)
		if !a.before(tds, book) {
			t.Errorf("%s: (c) target directory fsync does not precede the commit of its result\n  dir fsync:  %s\n  bookkeeping: %s", p.target, a.at(tds), a.at(book))
		}
	}
	for _, r := range a.results {
		if r.result != "review" {
			continue
		}
		draft := filepath.Join(a.w.ws, r.target)
		dr := a.renameInto(draft, r.sha)
		if dr < 0 {
			t.Errorf("review draft %s never written with the handoff's bytes", r.target)
			continue
		}
		ds := a.checkDurableWrite(t, "review draft "+r.target, dr)
		if book := a.commit[r.pattern()]; !a.before(ds, book) {
			t.Errorf("review draft %s: directory fsync does not precede the commit of its result\n  dir fsync:   %s\n  bookkeeping: %s", r.target, a.at(ds), a.at(book))
		}
	}
}

func (a *plAnalysis) checkReceipt(t *testing.T) {
	dir := filepath.Dir(a.receipt)
	for _, name := range []string{filepath.Base(a.receipt), "latest.json"} {
		p := filepath.Join(dir, name)
		r := a.renameInto(p, plHash(a.final[p]))
		if r < 0 {
			t.Errorf("(d) no rename put the final %s in place", name)
			continue
		}
		ds := a.checkDurableWrite(t, "receipt "+name, r)
		if name != "latest.json" {
			if row := a.commit[a.receipt]; !a.before(ds, row) {
				t.Errorf("(d) the run's row points at %s before the receipt is durable\n  dir fsync: %s\n  commit:    %s", name, a.at(ds), a.at(row))
			}
		}
	}
}

// checkConfined: every creation, write-open, rename, link, removal and
// mkdir is inside the workspace, except archive renames (and the archive
// directories) inside the inboxes.
func (a *plAnalysis) checkConfined(t *testing.T) {
	inWS := func(p string) bool { return strings.HasPrefix(p, a.w.ws+"/") }
	inInbox := func(p string) bool {
		for _, in := range a.w.inboxes {
			if strings.HasPrefix(p, in+"/") {
				return true
			}
		}
		return false
	}
	checked := 0
	defer func() { t.Logf("%d creating, writing, renaming or removing calls checked", checked) }()
	for _, o := range a.ops {
		if !o.Writes() || o.Path == "/dev/null" {
			continue
		}
		checked++
		ok := inWS(o.Path) && (o.Path2 == "" || inWS(o.Path2))
		if !ok && (o.IsRename() || o.Call == "mkdirat") && inInbox(o.Path) && (o.Path2 == "" || inInbox(o.Path2)) {
			rel, _ := filepath.Rel(filepath.Dir(o.Path), o.Path2)
			ok = o.Call == "mkdirat" && (path.Base(o.Path) == "processed" || path.Base(o.Path) == "malformed") ||
				strings.HasPrefix(rel, "processed/") || strings.HasPrefix(rel, "malformed/")
			if o.IsRename() && o.Flags != "RENAME_NOREPLACE" {
				t.Errorf("archive rename may replace a file: %s", o)
			}
		}
		if !ok {
			t.Errorf("write outside the workspace: %s", o)
		}
	}
}

// replay runs the trace through the forgetful model and checks, after every
// call, what a power cut there would leave. strict counts new directories
// durable only once their parent is fsynced. It returns the violations
// (one per invariant and object, first occurrence).
func (a *plAnalysis) replay(t *testing.T, strict, narrate bool) []string {
	m := fsrecord.NewModel()
	m.NewDirsDurable = !strict
	for p, b := range a.pre {
		m.Seed(p, b)
	}
	targets := map[string]bool{}
	for _, p := range a.plans {
		targets[filepath.Join(a.w.ws, p.target)] = true
	}
	// versions[target] lists the hashes the target held, in order; "" is
	// absent.
	versions := map[string][]string{}
	for tg := range targets {
		if b, ok := a.pre[tg]; ok {
			versions[tg] = []string{plHash(b)}
		} else {
			versions[tg] = []string{""}
		}
	}
	archived := map[int]int{} // op index → source index
	for si, s := range a.sources {
		i := a.find(0, func(o fsrecord.Op) bool {
			return o.IsRename() && o.Path == filepath.Join(s.inbox, s.name) && o.Path2 == filepath.Join(s.inbox, s.archivedAs)
		})
		archived[i] = si
	}
	isArchived := make([]bool, len(a.sources))
	durablePat := map[string]bool{}
	patterns := []string{a.receipt}
	for _, s := range a.sources {
		patterns = append(patterns, s.pattern(), s.content)
	}
	for _, p := range a.plans {
		patterns = append(patterns, p.pattern())
	}
	for _, r := range a.results {
		patterns = append(patterns, r.pattern())
	}
	ledgerDirs := map[string]bool{}
	for d := a.wal; d != "/"; d = filepath.Dir(d) {
		ledgerDirs[d] = true
	}
	durableHash := func(p string) (string, bool) {
		data, ok, known := m.Durable(p)
		if !ok {
			return "", true
		}
		if !known {
			return "unknown", false
		}
		return plHash(data), true
	}
	rel := func(p string) string {
		if r, err := filepath.Rel(a.w.dir, p); err == nil {
			return r
		}
		return p
	}
	var out []string
	seen := map[string]bool{}
	var cur int
	fail := func(key, format string, args ...any) {
		if seen[key] {
			return
		}
		seen[key] = true
		where := "before the run"
		if cur >= 0 {
			where = "after " + a.at(cur)
		}
		risk := m.AtRisk(a.w.dir)
		for i := range risk {
			risk[i] = rel(risk[i])
		}
		if len(risk) > 12 {
			risk = append(risk[:12], "…")
		}
		out = append(out, fmt.Sprintf("power cut %s: %s\n  not yet durable then: %s", where, fmt.Sprintf(format, args...), strings.Join(risk, ", ")))
	}
	check := func() {
		// I1: an archived source is durable in the spool and the ledger.
		for si, s := range a.sources {
			if !isArchived[si] {
				continue
			}
			if !durablePat[s.content] {
				fail("bytes "+s.name, "%s is archived on its host but its stored bytes would be lost (no handoff may be lost)", s.name)
			}
			if !durablePat[s.pattern()] {
				fail("ledger "+s.name, "%s is archived on its host but its source row would be lost (the next run would never ingest it)", s.name)
			}
		}
		for _, r := range a.results {
			if !durablePat[r.pattern()] {
				continue
			}
			tg := filepath.Join(a.w.ws, r.target)
			switch r.result {
			case "promoted", "routed":
				h, _ := durableHash(tg)
				vs := versions[tg]
				done := map[string]bool{r.after: true}
				for i := range a.plans {
					if a.plans[i].sha == r.sha {
						done = a.afters(i)
					}
				}
				want, got := -1, -1
				for i, v := range vs {
					if done[v] && want < 0 {
						want = i
					}
					if v == h {
						got = i
					}
				}
				if want < 0 || got < want {
					fail("result "+r.target+r.after, "the ledger durably says %s got %s, but the file would hold %.12s (no handoff may be lost)", r.target, r.after[:12], h)
				}
			case "review":
				if h, _ := durableHash(tg); h != r.sha {
					fail("draft "+r.target, "the ledger durably says %s went to review, but its draft %s would be lost", r.sha[:12], r.target)
				}
			}
		}
		for tg := range targets {
			h, known := durableHash(tg)
			if !known || h == versions[tg][0] {
				continue
			}
			// Every plan whose write the content shows (its own, or a
			// later plan's of its chain) must be in the ledger, with its
			// backup durable.
			found := false
			for i := range a.plans {
				plan := a.plans[i]
				if filepath.Join(a.w.ws, plan.target) != tg || !a.afters(i)[h] {
					continue
				}
				found = true
				r, _ := a.result(plan.sha)
				if !durablePat[plan.pattern()] && !durablePat[r.pattern()] {
					fail("plan "+tg+h+plan.sha, "%s would hold the write of plan %s, but neither the plan nor its result would be in the ledger (the next run would apply it again)", rel(tg), plan.sha[:12])
				}
				if a.held(tg, plan.before) {
					if bh, _ := durableHash(a.backupPath(plan)); bh != plan.before {
						fail("backup "+tg+h+plan.sha, "%s would be replaced but its backup %s would be lost", rel(tg), rel(a.backupPath(plan)))
					}
				}
			}
			if !found {
				fail("torn "+tg, "%s would hold content no plan produced (%.12s): torn or unknown", rel(tg), h)
			}
		}
		if durablePat[a.receipt] {
			if h, _ := durableHash(a.receipt); h != plHash(a.final[a.receipt]) {
				fail("receipt", "the ledger durably points at receipt %s, which would be lost", rel(a.receipt))
			}
		}
	}
	// Points worth narrating: the first source's and the first plan's
	// protocol steps, with what a power cut there would lose.
	key := map[int]string{}
	if narrate && len(a.sources) > 0 && len(a.plans) > 0 {
		s := a.sources[0]
		key[a.commit[s.pattern()]] = "ledger commit storing and recording " + s.name
		for i, si := range archived {
			if si == 0 {
				key[i] = "archive rename of " + s.name
			}
		}
		p := a.plans[len(a.plans)-1]
		for _, q := range a.plans {
			if q.before != "" {
				p = q
				break
			}
		}
		r, _ := a.result(p.sha)
		key[a.commit[p.pattern()]] = "plan commit for " + p.target
		if br := a.renameInto(a.backupPath(p), p.before); br >= 0 && p.before != "" {
			key[br] = "backup rename for " + p.target
		}
		tr := -1
		for i := range a.plans {
			if a.plans[i].sha != p.sha {
				continue
			}
			for _, q := range a.chain(i) {
				if j := a.renameInto(filepath.Join(a.w.ws, p.target), q.after); j >= 0 && (tr < 0 || j < tr) {
					tr = j
				}
			}
		}
		if tr >= 0 {
			key[tr] = "target rename of " + p.target
			dir := filepath.Dir(filepath.Join(a.w.ws, p.target))
			if ds := a.find(tr+1, func(o fsrecord.Op) bool { return o.IsSync() && o.Path == dir }); ds >= 0 {
				key[ds] = "target directory fsync"
			}
		}
		key[a.commit[r.pattern()]] = "bookkeeping commit for " + p.target
	}
	cur = -1
	check()
	for i, o := range a.ops {
		cur = i
		if o.IsRename() && targets[o.Path2] {
			versions[o.Path2] = append(versions[o.Path2], a.renamed[i])
		}
		m.Apply(o)
		if si, ok := archived[i]; ok && o.IsRename() {
			isArchived[si] = true
		}
		if o.IsSync() && (o.Path == a.wal || o.Path == a.db || ledgerDirs[o.Path]) {
			wal, _, _ := m.Durable(a.wal)
			dbData, _, _ := m.Durable(a.db)
			for _, p := range patterns {
				if !durablePat[p] && (bytes.Contains(wal, []byte(p)) || bytes.Contains(dbData, []byte(p))) {
					durablePat[p] = true
				}
			}
		}
		check()
		if label, ok := key[i]; ok {
			// Inbox renames are the hosts' business (undoing one is
			// harmless), the -shm file is rebuilt, the lock's pid is
			// informative only.
			var risk []string
			for _, r := range m.AtRisk(a.w.ws) {
				if !strings.Contains(r, "ledger.db-shm") && !strings.Contains(r, ".handoff/lock") {
					risk = append(risk, rel(r))
				}
			}
			sort.Strings(risk)
			if len(risk) == 0 {
				risk = []string{"nothing in the workspace"}
			}
			if len(risk) > 8 {
				risk = append(risk[:8], fmt.Sprintf("… %d more", len(risk)-8))
			}
			t.Logf("power cut right after %-40s would lose: %s", label, strings.Join(risk, ", "))
		}
	}
	for _, s := range a.sources {
		if !durablePat[s.pattern()] && !strict {
			out = append(out, fmt.Sprintf("source %s never durable in the ledger", s.name))
		}
	}
	return out
}
