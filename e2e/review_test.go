package e2e

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/handoff-sync/handoff/internal/failpoint"
)

// reviewWorld is a workspace after a sync that left, waiting for review: a
// stale update of an existing card (hash-conflict), a document append with
// a secret-like value, a document append to an unsafe target, and a
// spare item for the command that finishes a crashed one.
type reviewWorld struct {
	*world
	card, secret, unsafe, spare string // their sha256s
	// fixScript is an editor that retargets unsafe.md to rules/edited.md.
	fixScript string
}

const (
	rvCardBefore = "---\ntopic: go\ncategory: c\ntags: [go]\n---\nOld rule.\n"
	rvCardAfter  = "---\ntopic: go\ncategory: c\ntags: [go]\n---\nNew rule.\n"
	rvSecretLine = "- marker-SECRET AKIAABCDEFGHIJKLMNOP"
	rvEditedLine = "- marker-EDITED"
)

func newReviewWorld(t *testing.T) *reviewWorld {
	t.Helper()
	w := &reviewWorld{world: newWorld(t)}
	mustWrite(t, filepath.Join(w.ws, "memory/cards/go.md"), rvCardBefore)
	in := w.inboxes[0]
	card := cardHandoff("update-card", "go.md", "New rule.", "Expected card SHA256", strings.Repeat("0", 64))
	card = strings.Replace(card, "topic: go.md", "topic: go", 1)
	card = strings.Replace(card, "tags: [x]", "tags: [go]", 1)
	secret := docHandoff("TOOLS.md", rvSecretLine)
	unsafe := docHandoff("../outside.md", rvEditedLine)
	spare := docHandoff("../spare.md", "- spare")
	mustWrite(t, filepath.Join(in, "card.md"), card)
	mustWrite(t, filepath.Join(in, "secret.md"), secret)
	mustWrite(t, filepath.Join(in, "unsafe.md"), unsafe)
	mustWrite(t, filepath.Join(in, "spare.md"), spare)
	w.card, w.secret, w.unsafe, w.spare = sum(card), sum(secret), sum(unsafe), sum(spare)
	w.fixScript = filepath.Join(w.dir, "fix.sh")
	mustWrite(t, w.fixScript, "sed -i 's#^\\.\\./outside\\.md$#rules/edited.md#' \"$1\"\n")
	if code, out := w.sync(); code != 0 || !strings.Contains(out, "Review 4") {
		t.Fatalf("fixture sync exited %d:\n%s", code, out)
	}
	if got := w.read("memory/cards/go.md"); got != rvCardBefore {
		t.Fatalf("the stale update was applied by the sync: %q", got)
	}
	return w
}

func (w *reviewWorld) read(rel string) string {
	b, _ := os.ReadFile(filepath.Join(w.ws, rel))
	return string(b)
}

func (c reviewCase) environ(w *reviewWorld) []string {
	if c.env == nil {
		return nil
	}
	return c.env(w)
}

func (w *reviewWorld) review(env []string, args ...string) (int, string) {
	return w.run(env, append(append([]string{"review"}, args...), "--manifest", w.manifest)...)
}

func (w *reviewWorld) db() *sql.DB {
	w.t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(w.ws, ".handoff/ledger.db"))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { db.Close() })
	return db
}

func (w *reviewWorld) count(q string, args ...any) int {
	w.t.Helper()
	db := w.db()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		w.t.Fatalf("%s: %v", q, err)
	}
	db.Close()
	return n
}

// draftOf is the review draft of the source named name with content sha.
func draftOf(name, sha string) string {
	return ".handoff/review/" + strings.TrimSuffix(name, ".md") + "." + sha[:12] + ".md"
}

// reviewCase is one decision and what it must leave once done.
type reviewCase struct {
	name string
	item func(w *reviewWorld) (sha, source string)
	args func(w *reviewWorld) []string
	env  func(w *reviewWorld) []string
	// applied reports whether the decision's change is in the workspace,
	// and fails when it is there more than once.
	applied func(w *reviewWorld) bool
	// changes: the decision writes to the workspace (accept, edit).
	changes bool
	points  []string
	// setup, when set, adds to the world what the case decides about.
	setup func(w *reviewWorld)
}

// Lines of the revision case: a document append and its revision.
const (
	rvRevOld = "- marker-REV-ONE jq for receipts"
	rvRevNew = "- marker-REV-TWO jq 1.6 for receipts"
)

// revisionSetup routes rev.md's first version, then syncs its revision,
// which waits in review as revised.
func revisionSetup(w *reviewWorld) {
	in := w.inboxes[0]
	mustWrite(w.t, filepath.Join(in, "rev.md"), docHandoff("rules/rev.md", rvRevOld))
	if code, out := w.sync(); code != 0 {
		w.t.Fatalf("sync of the first version exited %d:\n%s", code, out)
	}
	mustWrite(w.t, filepath.Join(in, "rev.md"), docHandoff("rules/rev.md", rvRevNew))
	if code, out := w.sync(); code != 0 || !strings.Contains(out, "Review 1") {
		w.t.Fatalf("sync of the revision exited %d:\n%s", code, out)
	}
}

var reviewCases = []reviewCase{
	{
		name: "accept-card",
		item: func(w *reviewWorld) (string, string) { return w.card, "card.md" },
		args: func(w *reviewWorld) []string { return []string{"accept", w.card[:12], "--note", "ok"} },
		applied: func(w *reviewWorld) bool {
			got := w.read("memory/cards/go.md")
			if got != rvCardBefore && got != rvCardAfter {
				w.t.Fatalf("the card is half applied: %q", got)
			}
			return got == rvCardAfter
		},
		changes: true,
		points:  []string{"review.planned", "backup.written", "commit.written", "bookkeeping.done", "review.decided", "review.draft-removed"},
	},
	{
		name: "accept-document",
		item: func(w *reviewWorld) (string, string) { return w.secret, "secret.md" },
		args: func(w *reviewWorld) []string { return []string{"accept", w.secret[:12], "--allow-secret"} },
		applied: func(w *reviewWorld) bool {
			n := strings.Count(w.read("TOOLS.md"), "marker-SECRET")
			if n > 1 {
				w.t.Fatalf("applied %d times", n)
			}
			return n == 1
		},
		changes: true,
		points:  []string{"review.planned", "commit.written", "bookkeeping.done", "review.decided", "review.draft-removed"},
	},
	{
		// Accepting a revision replaces the first version's text in
		// place: the document holds one of the two, never both.
		name:  "accept-revision",
		setup: revisionSetup,
		item: func(w *reviewWorld) (string, string) {
			return sum(docHandoff("rules/rev.md", rvRevNew)), "rev.md"
		},
		args: func(w *reviewWorld) []string {
			return []string{"accept", sum(docHandoff("rules/rev.md", rvRevNew))[:12]}
		},
		applied: func(w *reviewWorld) bool {
			doc := w.read("rules/rev.md")
			one, two := strings.Count(doc, "marker-REV-ONE"), strings.Count(doc, "marker-REV-TWO")
			if one+two != 1 {
				w.t.Fatalf("the document holds %d first and %d second versions: %q", one, two, doc)
			}
			return two == 1
		},
		changes: true,
		points:  []string{"review.planned", "backup.written", "commit.written", "bookkeeping.done", "review.decided", "review.draft-removed"},
	},
	{
		name: "edit",
		item: func(w *reviewWorld) (string, string) { return w.unsafe, "unsafe.md" },
		args: func(w *reviewWorld) []string { return []string{"edit", w.unsafe[:12], "--note", "fixed"} },
		env:  func(w *reviewWorld) []string { return []string{"VISUAL=", "EDITOR=sh " + w.fixScript} },
		applied: func(w *reviewWorld) bool {
			n := strings.Count(w.read("rules/edited.md"), "marker-EDITED")
			if n > 1 {
				w.t.Fatalf("applied %d times", n)
			}
			return n == 1
		},
		changes: true,
		points:  []string{"review.edit-stored", "review.planned", "commit.written", "bookkeeping.done", "review.decided", "review.draft-removed"},
	},
	{
		name: "reject",
		item: func(w *reviewWorld) (string, string) { return w.unsafe, "unsafe.md" },
		args: func(w *reviewWorld) []string { return []string{"reject", w.unsafe[:12], "--note", "no"} },
		applied: func(w *reviewWorld) bool {
			return false
		},
		points: []string{"review.decided", "review.draft-removed"},
	},
}

// state is what the ledger and the workspace say of a case's item.
type reviewState struct {
	applied                bool
	done, started, open    int
	draft, spool, outsider bool
}

func (w *reviewWorld) state(c reviewCase) reviewState {
	sha, src := c.item(w)
	_, errD := os.Stat(filepath.Join(w.ws, draftOf(src, sha)))
	_, inStore := stored(w.t, w.ws)[sha]
	_, errO := os.Stat(filepath.Join(w.dir, "outside.md"))
	return reviewState{
		applied: c.applied(w),
		done:    w.count(`SELECT count(*) FROM decisions WHERE sha256 = ? AND state = 'done'`, sha),
		started: w.count(`SELECT count(*) FROM decisions WHERE sha256 = ? AND state = 'started'`, sha),
		open:    w.count(`SELECT count(*) FROM plans WHERE state = 'planned'`),
		draft:   errD == nil, spool: inStore, outsider: errO == nil,
	}
}

// checkNeverBoth: whatever a crash left, the item is waiting (nothing
// applied, no decision done, its draft there), under way (a started
// decision with its open plan, which the next command finishes), or
// decided (applied, for accept and edit, with one done decision); never
// applied without a decision, never decided and not applied, never lost.
func (w *reviewWorld) checkNeverBoth(c reviewCase, s reviewState, when string) {
	t := w.t
	t.Helper()
	if !s.spool {
		t.Errorf("%s: the item's bytes are gone from the spool", when)
	}
	if s.outsider {
		t.Errorf("%s: a file was written outside the workspace", when)
	}
	if s.done > 1 || s.done+s.started > 1 {
		t.Errorf("%s: %d done and %d started decisions", when, s.done, s.started)
	}
	switch {
	case s.started == 1:
		if s.open != 1 {
			t.Errorf("%s: a started decision without its open plan (%d open)", when, s.open)
		}
	case s.done == 1:
		if c.changes && !s.applied {
			t.Errorf("%s: decided, but its change is not in the workspace", when)
		}
	default:
		if s.applied {
			t.Errorf("%s: its change is in the workspace, but no decision is recorded", when)
		}
		if !s.draft {
			t.Errorf("%s: still waiting, but its draft is gone", when)
		}
	}
}

// checkFinished: after the next command, nothing is under way, and the
// item is decided (applied once, its draft gone) or still waiting (then
// the person runs the command again and it is decided).
func (w *reviewWorld) checkFinished(c reviewCase) {
	t := w.t
	t.Helper()
	s := w.state(c)
	w.checkNeverBoth(c, s, "after the next command")
	if s.started != 0 || s.open != 0 {
		t.Fatalf("still under way after the next command: %+v", s)
	}
	if s.done == 0 {
		code, out := w.review(c.environ(w), c.args(w)...)
		if code != 0 {
			t.Fatalf("the decision again, after the crash, exited %d:\n%s", code, out)
		}
		s = w.state(c)
	}
	if s.done != 1 || s.draft || (c.changes && !s.applied) {
		t.Errorf("not decided exactly once: %+v", s)
	}
	// A rerun says it is done and changes nothing.
	if c.name != "edit" {
		if code, out := w.review(c.environ(w), c.args(w)...); code != 0 || !strings.Contains(out, "already") {
			t.Errorf("a rerun exited %d:\n%s", code, out)
		}
		if s2 := w.state(c); s2 != s {
			t.Errorf("a rerun changed %+v to %+v", s, s2)
		}
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE state = 'started'`); n != 0 {
		t.Errorf("%d decisions left started", n)
	}
	w.checkNoTemps()
}

func (w *reviewWorld) checkNoTemps() {
	filepath.WalkDir(w.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".handoff-tmp.") {
			w.t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// TestReviewCrashAtEveryFailpoint kills `handoff review accept`, `edit` and
// `reject` with SIGKILL at every failpoint each passes (the review ones,
// and the ingester's inside accept and edit), then runs the next command:
// a sync, or another review command (which finishes what the crash left
// before it decides anything). Invariants: the item ends decided exactly
// once or still waiting, never both, never lost, nothing applied twice.
func TestReviewCrashAtEveryFailpoint(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range reviewCases {
		for _, fp := range c.points {
			for _, next := range []string{"sync", "review"} {
				t.Run(c.name+"/"+fp+"/"+next, func(t *testing.T) {
					w := newReviewWorld(t)
					if c.setup != nil {
						c.setup(w)
					}
					code, out := w.review(append(c.environ(w), failpoint.Env+"="+fp), c.args(w)...)
					if code != -9 {
						t.Fatalf("failpoint %s not reached (exit %d):\n%s", fp, code, out)
					}
					covered[fp] = true
					w.checkNeverBoth(c, w.state(c), "after the crash")
					switch next {
					case "sync":
						if code, out := w.sync(); code != 0 {
							t.Fatalf("the sync after the crash exited %d:\n%s", code, out)
						}
					case "review":
						if code, out := w.review(nil, "reject", w.spare[:12], "--note", "spare"); code != 0 {
							t.Fatalf("the review command after the crash exited %d:\n%s", code, out)
						}
					}
					w.checkFinished(c)
				})
			}
		}
	}
	for _, fp := range failpoint.ReviewNames {
		if !covered[fp] {
			t.Errorf("no crash test reached failpoint %s", fp)
		}
	}
}

// TestReviewLockedExits75: while another run holds the workspace lock,
// accept, edit and reject exit 75 at once with a hint and change nothing;
// list and show, which write nothing, still answer.
func TestReviewLockedExits75(t *testing.T) {
	w := newReviewWorld(t)
	fl := flock.New(filepath.Join(w.ws, ".handoff/lock"))
	if ok, err := fl.TryLock(); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	defer fl.Unlock()
	for _, args := range [][]string{
		{"accept", w.card[:12]},
		{"reject", w.card[:12], "--note", "x"},
		{"edit", w.card[:12]},
	} {
		start := time.Now()
		code, out := w.review([]string{"EDITOR=true"}, args...)
		if code != 75 || !strings.Contains(out, "another handoff run holds the workspace lock") || !strings.Contains(out, "hint: a sync or another `handoff review`") {
			t.Errorf("%v: exit %d, want 75 with a hint:\n%s", args, code, out)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("%v took %v; it must exit at once", args, time.Since(start))
		}
	}
	if got := w.read("memory/cards/go.md"); got != rvCardBefore {
		t.Errorf("the card changed: %q", got)
	}
	if n := w.count(`SELECT count(*) FROM decisions`); n != 0 {
		t.Errorf("%d decisions recorded", n)
	}
	for _, args := range [][]string{{"list"}, {"show", w.card[:12]}} {
		if code, out := w.review(nil, args...); code != 0 {
			t.Errorf("%v while locked: exit %d:\n%s", args, code, out)
		}
	}
}

// TestSyncWhileReviewHoldsLock: while `handoff review edit` holds the lock
// (its editor is open), a sync exits 75 at once naming its pid, and pulls
// nothing; once the editor is done, the edit is applied and the next sync
// runs.
func TestSyncWhileReviewHoldsLock(t *testing.T) {
	w := newReviewWorld(t)
	started, release := filepath.Join(w.dir, "editor-started"), filepath.Join(w.dir, "editor-release")
	script := filepath.Join(w.dir, "editor.sh")
	mustWrite(t, script, fmt.Sprintf("touch %s\nwhile [ ! -e %s ]; do sleep 0.05; done\nsed -i 's#^\\.\\./outside\\.md$#rules/edited.md#' \"$1\"\n", started, release))
	edit := exec.Command(binary(), "review", "edit", w.unsafe[:12], "--manifest", w.manifest)
	edit.Env = append(os.Environ(), "VISUAL=", "EDITOR=sh "+script)
	var editOut strings.Builder
	edit.Stdout, edit.Stderr = &editOut, &editOut
	if err := edit.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			edit.Process.Kill()
			t.Fatalf("the editor never started:\n%s", editOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustWrite(t, filepath.Join(w.inboxes[0], "late.md"), docHandoff("TOOLS.md", "- late"))
	start := time.Now()
	code, out := w.sync()
	if code != 75 || !strings.Contains(out, fmt.Sprintf("pid %d", edit.Process.Pid)) || !strings.Contains(out, "hint: ") {
		t.Errorf("sync while review edits: exit %d, want 75 naming pid %d:\n%s", code, edit.Process.Pid, out)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the sync took %v; it must exit at once", time.Since(start))
	}
	if _, err := os.Stat(filepath.Join(w.inboxes[0], "late.md")); err != nil {
		t.Errorf("the locked-out sync pulled late.md: %v", err)
	}
	mustWrite(t, release, "")
	if err := edit.Wait(); err != nil {
		t.Fatalf("edit: %v\n%s", err, editOut.String())
	}
	if !strings.Contains(editOut.String(), "routed rules/edited.md") {
		t.Errorf("edit output:\n%s", editOut.String())
	}
	if code, out := w.sync(); code != 0 || !strings.Contains(out, "Routed 1") {
		t.Errorf("the next sync exited %d:\n%s", code, out)
	}
}
