package e2e

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/handoff-sync/handoff/receipts"
)

// dfMount mounts a tmpfs of the given size (mount's syntax: 256k, 8m) on
// dir, creating it, and unmounts it when the test ends. Without the right
// to mount, the test is skipped unless HANDOFF_E2E_REQUIRED is set.
func dfMount(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput()
	if err != nil {
		if os.Getenv("HANDOFF_E2E_REQUIRED") != "" {
			t.Fatalf("mount tmpfs on %s: %v: %s", dir, err, out)
		}
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

func dfRemount(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s: %v: %s", dir, err, out)
	}
}

// dfFill writes a filler file in dir until the file system is full and
// returns its path.
func dfFill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler.bin")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			return p
		}
	}
}

// dfStoredOnly is the acknowledgement invariant after any failure: every
// file archived in an inbox has its bytes in the ledger's store (whole: they
// hash to their key) and its source in the ledger. stored checks that the
// store holds nothing partial or foreign.
func dfStoredOnly(t *testing.T, w *world) {
	t.Helper()
	have := map[string]bool{}
	for sha := range stored(t, w.ws) {
		have[sha] = true
	}
	recorded := map[string]bool{}
	if db, err := sql.Open("sqlite", filepath.Join(w.ws, ".handoff/ledger.db")+"?mode=ro"); err == nil {
		rows, err := db.Query(`SELECT sha256 FROM sources`)
		if err == nil {
			for rows.Next() {
				var s string
				rows.Scan(&s)
				recorded[s] = true
			}
			rows.Close()
		}
		db.Close()
	}
	for _, in := range w.inboxes {
		for _, sub := range []string{"processed", "malformed"} {
			ents, _ := os.ReadDir(filepath.Join(in, sub))
			for _, e := range ents {
				b, _ := os.ReadFile(filepath.Join(in, sub, e.Name()))
				sha := sum(string(b))
				if !have[sha] || !recorded[sha] {
					t.Errorf("%s/%s was archived on its host but is not stored (bytes %v, source %v): a remote copy acknowledged before local storage", sub, e.Name(), have[sha], recorded[sha])
				}
			}
		}
	}
}

// dfTargetsWhole: each target holds either its content from before the
// run or the after-content of a plan the ledger knows, never a torn mix;
// no temporary file is left in the workspace.
func dfTargetsWhole(t *testing.T, w *world, before map[string]string) {
	t.Helper()
	allowed := map[string]bool{}
	if db, err := sql.Open("sqlite", filepath.Join(w.ws, ".handoff/ledger.db")+"?mode=ro"); err == nil {
		rows, err := db.Query(`SELECT target, after_sha256 FROM plans`)
		if err == nil {
			for rows.Next() {
				var tg, after string
				rows.Scan(&tg, &after)
				allowed[tg+" "+after] = true
			}
			rows.Close()
		}
		db.Close()
	}
	for tg, old := range before {
		b, err := os.ReadFile(filepath.Join(w.ws, tg))
		if errors.Is(err, fs.ErrNotExist) && old == "" {
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tg, err)
			continue
		}
		if string(b) != old && !allowed[tg+" "+sum(string(b))] {
			t.Errorf("%s is torn: %d bytes that are neither its old content nor any planned content", tg, len(b))
		}
	}
	filepath.WalkDir(w.ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".handoff-tmp.") {
			t.Errorf("temporary file left in the workspace: %s", p)
		}
		return nil
	})
}

// dfReceiptError returns the latest receipt's host and run errors.
func dfReceiptError(t *testing.T, w *world) (*receipts.Receipt, string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(w.ws, ".handoff/receipts/latest.json"))
	if err != nil {
		return nil, ""
	}
	r, err := receipts.Decode(data)
	if err != nil {
		t.Fatalf("latest receipt: %v", err)
	}
	msg := r.Error
	for _, h := range r.Hosts {
		msg += " " + h.Error
	}
	return r, msg
}

// TestDiskFullSpool: the workspace (ledger and its store inside) is a
// 512 KiB tmpfs and one handoff is bigger than the free space. The run
// fails the host with ENOSPC named; nothing that was not stored is
// archived; nothing partial is stored and no torn target remains. After the file system grows, the next
// run converges: everything applied exactly once.
func TestDiskFullSpool(t *testing.T) {
	w := newWorld(t)
	dfMount(t, w.ws, "512k")
	initWorkspace(t, w.ws) // the mount hides the workspace newWorld made
	markers := w.mixed()
	big := docHandoff("TOOLS.md", "- marker-BIG\n"+strings.Repeat("- filler line of a large handoff\n", 18000))
	if len(big) < 520<<10 || len(big) > 1<<20 {
		t.Fatalf("big handoff is %d bytes; it must exceed the tmpfs and stay under max_file_size", len(big))
	}
	mustWrite(t, filepath.Join(w.inboxes[0], "big.md"), big)
	markers["TOOLS.md"] = append(markers["TOOLS.md"], "marker-BIG")
	results := map[string]string{"big.md": "routed"}
	for k, v := range mixedResults {
		results[k] = v
	}
	before := map[string]string{}
	for _, tg := range []string{"TOOLS.md", "rules/go.md", ".learnings/LEARNINGS.md", "memory/cards/alpha.md", "memory/cards/beta.md", "memory/cards/existing.md"} {
		b, _ := os.ReadFile(filepath.Join(w.ws, tg))
		before[tg] = string(b)
	}

	code, out := w.sync()
	if code != 1 {
		t.Fatalf("sync on a full disk exited %d, want 1:\n%s", code, out)
	}
	t.Logf("first run on the full disk:\n%s", out)
	if !strings.Contains(out, "no space left on device") {
		t.Errorf("the failure does not name the problem (ENOSPC):\n%s", out)
	}
	if r, msg := dfReceiptError(t, w); r != nil && (r.Outcome == "ok" || !strings.Contains(msg, "no space left on device")) {
		t.Errorf("receipt outcome %q, errors %q: want a failure naming ENOSPC", r.Outcome, msg)
	}
	if _, err := os.Stat(filepath.Join(w.inboxes[0], "big.md")); err != nil {
		t.Errorf("big.md left its inbox although it could not be stored: %v", err)
	}
	dfStoredOnly(t, w)
	dfTargetsWhole(t, w, before)

	// A second run on the still-full disk changes nothing for the worse.
	if code, out := w.sync(); code != 1 {
		t.Fatalf("second run on a full disk exited %d:\n%s", code, out)
	}
	dfStoredOnly(t, w)
	dfTargetsWhole(t, w, before)

	dfRemount(t, w.ws, "16m")
	if code, out := w.sync(); code != 0 {
		t.Fatalf("run after freeing space exited %d:\n%s", code, out)
	}
	w.checkConverged(markers, results)
}

// TestDiskFullTarget: the workspace's own file system is full while the
// state directory (.handoff: spool, ledger, backups, receipts) has room, so
// storing and planning succeed and the target write fails. The handoff is
// not marked applied, the target is untouched, and after space is freed
// the next run applies it exactly once.
func TestDiskFullTarget(t *testing.T) {
	w := newWorld(t)
	dfMount(t, w.ws, "1m")
	dfMount(t, filepath.Join(w.ws, ".handoff"), "16m")
	initWorkspace(t, w.ws) // the mounts hide the workspace newWorld made
	existing := "---\ntopic: e\ncategory: c\ntags: [x]\n---\nold\n"
	tools := "# Tools\n\n" + strings.Repeat("- an existing tool line\n", 200)
	mustWrite(t, filepath.Join(w.ws, "memory/cards/existing.md"), existing)
	mustWrite(t, filepath.Join(w.ws, "TOOLS.md"), tools)
	a := w.inboxes[0]
	mustWrite(t, filepath.Join(a, "d1.md"), docHandoff("TOOLS.md", "- marker-D1"))
	mustWrite(t, filepath.Join(a, "u1.md"), cardHandoff("update-card", "existing.md", "new body marker-U1", "Expected card SHA256", sum(existing)))
	results := map[string]string{"d1.md": "routed", "u1.md": "promoted"}
	markers := map[string][]string{"TOOLS.md": {"marker-D1"}, "memory/cards/existing.md": {"marker-U1"}}
	filler := dfFill(t, w.ws)

	code, out := w.sync()
	if code != 1 {
		t.Fatalf("sync with a full workspace exited %d, want 1:\n%s", code, out)
	}
	t.Logf("run with a full workspace:\n%s", out)
	firstOut := out
	r, msg := dfReceiptError(t, w)
	if r == nil || r.Outcome != "failed" || !strings.Contains(msg, "no space left on device") {
		t.Fatalf("receipt %+v: want outcome failed with an error naming ENOSPC; output:\n%s", r, out)
	}
	for _, h := range r.Handoffs {
		if h.Result == "routed" || h.Result == "promoted" {
			t.Errorf("%s reported %s although its target could not be written", h.Name, h.Result)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(w.ws, "TOOLS.md")); string(b) != tools {
		t.Errorf("TOOLS.md changed (%d bytes) although the write failed", len(b))
	}
	if b, _ := os.ReadFile(filepath.Join(w.ws, "memory/cards/existing.md")); string(b) != existing {
		t.Errorf("existing.md changed although the write failed: %q", b)
	}
	db, err := sql.Open("sqlite", filepath.Join(w.ws, ".handoff/ledger.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var applied, pending int
	db.QueryRow(`SELECT count(*) FROM handoffs WHERE result IN ('routed', 'promoted')`).Scan(&applied)
	db.QueryRow(`SELECT count(*) FROM sources WHERE result = ''`).Scan(&pending)
	db.Close()
	if applied != 0 || pending != 2 {
		t.Fatalf("ledger: %d applied, %d pending; want 0 and 2 (nothing marked applied)", applied, pending)
	}
	dfStoredOnly(t, w)
	dfTargetsWhole(t, w, map[string]string{"TOOLS.md": tools, "memory/cards/existing.md": existing})

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if code, out := w.sync(); code != 0 {
		t.Fatalf("run after freeing space exited %d:\n%s", code, out)
	}
	w.checkConverged(markers, results)
	if b, _ := os.ReadFile(filepath.Join(w.ws, "TOOLS.md")); !strings.HasPrefix(string(b), strings.TrimRight(tools, "\n")+"\n\n- marker-D1") {
		t.Errorf("TOOLS.md after recovery lost its old content or misplaced the append:\n%s", b)
	}
	// And nothing more happens on a further run.
	if code, out := w.sync(); code != 0 || !strings.Contains(out, "NO_UPDATES") {
		t.Fatalf("a further run exited %d or changed something:\n%s", code, out)
	}
	w.checkConverged(markers, results)

	// The person at the terminal (or the cron mail) must learn why the
	// run failed, not only from the receipt.
	t.Run("ErrorShown", func(t *testing.T) {
		if !strings.Contains(firstOut, "no space left on device") {
			msg := fmt.Sprintf("a run whose ingest failed exits 1 but prints only the summary; the error (in the receipt) is not shown:\n%s", firstOut)
			t.Error(msg)
		}
	})
}
