package handoff

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/handoff-sync/handoff/receipts"
)

// wsSync runs Sync with a deadline and fails the test if it does not
// return: a FIFO or a hostile name must never make a run hang.
func wsSync(t *testing.T, e *testEnv) *receipts.Receipt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type res struct {
		r   *receipts.Receipt
		err error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := Sync(ctx, Options{Manifest: e.m, Dial: e.dial})
		ch <- res{r, err}
	}()
	select {
	case x := <-ch:
		if x.err != nil {
			t.Fatalf("Sync: %v", x.err)
		}
		return x.r
	case <-time.After(40 * time.Second):
		t.Fatal("Sync hung")
		return nil
	}
}

// wsOutside snapshots everything under the test's directory except the
// workspace and the inboxes, plus a few absolute paths hostile names
// point at.
func wsOutside(t *testing.T, e *testEnv) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(e.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == e.ws || p == filepath.Join(e.dir, "repos") {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		fmt.Fprintf(&b, "%s %v %d %d\n", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			b.WriteString(sum(string(data)) + "\n")
		}
		return nil
	})
	for _, p := range []string{"/etc/passwd", "/x", "/x.md", "/tmp/x", "/tmp/x.md", filepath.Join(e.dir, "..", "x"), filepath.Join(e.dir, "..", "x.md")} {
		if data, err := os.ReadFile(p); err == nil {
			fmt.Fprintf(&b, "%s %s\n", p, sum(string(data)))
		} else {
			fmt.Fprintf(&b, "%s absent\n", p)
		}
	}
	return b.String()
}

// TestWorkspaceSafetyHostileTargets: hostile card names and document
// targets are routed to review with unsafe-card-name / unsafe-target (a NUL
// makes the whole handoff malformed, per SPEC), the draft holds the exact
// bytes, and nothing is written outside the workspace.
func TestWorkspaceSafetyHostileTargets(t *testing.T) {
	long := strings.Repeat("a", 297) + ".md" // 300 bytes
	names := []struct{ label, name string }{
		{"dotdot", "../x"},
		{"dotdot.md", "../x.md"},
		{"absolute", "/etc/passwd"},
		{"absolute.md", "/tmp/x.md"},
		{"cards-escape", "cards/../../x"},
		{"cards-escape.md", "memory/cards/../../x.md"},
		{"nul", "x\x00.md"},
		{"300 bytes", long},
		{"300 bytes rule", "rules/" + long},
		{"one dot leader", "TOOLS\u2024md"},
		{"fullwidth", "\uff34\uff2f\uff2f\uff2c\uff33.md"},
		{"fullwidth dot", "TOOLS\uff0emd"},
		{"rules escape", "rules/../../x.md"},
		{"rules nested", "rules/a/b.md"},
		{"dot slash", "./TOOLS.md"},
		{"trailing slash", "rules/x.md/"},
		{"backslash", "..\\x.md"},
	}
	for _, n := range names {
		for _, kind := range []string{"card", "document"} {
			t.Run(kind+"/"+n.label, func(t *testing.T) {
				e := newEnv(t)
				e.writeWS("TOOLS.md", "# Tools\n")
				var content, reason string
				if kind == "card" {
					content, reason = card("create-card", n.name, goodFM), "unsafe-card-name"
				} else {
					content, reason = doc(n.name, "- hostile text"), "unsafe-target"
				}
				result := "review"
				if strings.ContainsRune(n.name, 0) {
					result, reason = "malformed", "parse-error"
				}
				e.put(e.inbox, "h.md", content)
				before := wsOutside(t, e)
				r := wsSync(t, e)
				if len(r.Handoffs) != 1 {
					t.Fatalf("handoffs %+v", r.Handoffs)
				}
				h := r.Handoffs[0]
				if h.Result != result || h.Reason != reason {
					t.Fatalf("target %q: %s/%s, want %s/%s", n.name, h.Result, h.Reason, result, reason)
				}
				if result == "review" && e.readWS(h.Target) != content {
					t.Errorf("review draft %s does not hold the handoff's bytes", h.Target)
				}
				if after := wsOutside(t, e); after != before {
					t.Errorf("something outside the workspace changed")
				}
				if got := e.readWS("TOOLS.md"); got != "# Tools\n" {
					t.Errorf("TOOLS.md changed: %q", got)
				}
				if r.Outcome != "ok" {
					t.Errorf("outcome %s: %s", r.Outcome, r.Error)
				}
			})
		}
	}
}

// TestWorkspaceSafetyLinkedTargets: a card or document that is a symlink
// to a file outside goes to review; one that is a hard link to a file
// outside is replaced by rename, so the outside file keeps its bytes.
func TestWorkspaceSafetyLinkedTargets(t *testing.T) {
	existing := goodFM + "\nold\n"
	tests := []struct {
		name, target, result, reason string
		hard                         bool
		content                      func() string
	}{
		{"symlinked card", "memory/cards/x.md", "review", "symlink", false,
			func() string {
				return card("update-card", "x.md", goodFM+"\nnew", "Expected card SHA256", sum(existing))
			}},
		{"hard-linked card", "memory/cards/x.md", "promoted", "", true,
			func() string {
				return card("update-card", "x.md", goodFM+"\nnew", "Expected card SHA256", sum(existing))
			}},
		{"symlinked TOOLS.md", "TOOLS.md", "review", "symlink", false,
			func() string { return doc("TOOLS.md", "- appended") }},
		{"hard-linked TOOLS.md", "TOOLS.md", "routed", "", true,
			func() string { return doc("TOOLS.md", "- appended") }},
		{"hard-linked rule", "rules/go.md", "routed", "", true,
			func() string { return doc("rules/go.md", "- appended") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			outside := filepath.Join(e.dir, "outside", "file.md")
			if err := os.MkdirAll(filepath.Dir(outside), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(outside, []byte(existing), 0o644); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(e.ws, tc.target)
			os.MkdirAll(filepath.Dir(link), 0o755)
			var err error
			if tc.hard {
				err = os.Link(outside, link)
			} else {
				err = os.Symlink(outside, link)
			}
			if err != nil {
				t.Fatal(err)
			}
			e.put(e.inbox, "h.md", tc.content())
			r := wsSync(t, e)
			if len(r.Handoffs) != 1 || r.Handoffs[0].Result != tc.result || r.Handoffs[0].Reason != tc.reason {
				t.Fatalf("handoffs %+v, want %s/%s", r.Handoffs, tc.result, tc.reason)
			}
			if b, _ := os.ReadFile(outside); string(b) != existing {
				t.Fatalf("the file outside the workspace changed through a link:\n%q", b)
			}
			if ents, _ := os.ReadDir(filepath.Dir(outside)); len(ents) != 1 {
				t.Fatalf("%d files appeared next to the outside file", len(ents)-1)
			}
			fi, err := os.Lstat(link)
			if err != nil {
				t.Fatal(err)
			}
			if tc.hard {
				st := fi.Sys().(*syscall.Stat_t)
				if st.Nlink != 1 {
					t.Errorf("%s still shares its inode (%d links): written in place", tc.target, st.Nlink)
				}
				if got := e.readWS(tc.target); got == existing || r.Handoffs[0].AfterSHA256 != sum(got) {
					t.Errorf("%s = %q, not the new content", tc.target, got)
				}
			} else if fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s is no longer the symlink; it was replaced although routed to review", tc.target)
			}
		})
	}
}

// TestWorkspaceSafetyNotRegular: a target that is a FIFO or a directory is
// routed to review as not-regular, and the run does not hang on the FIFO.
func TestWorkspaceSafetyNotRegular(t *testing.T) {
	existing := goodFM + "\nold\n"
	for _, tc := range []struct{ name, target, content string }{
		{"fifo TOOLS.md", "TOOLS.md", doc("TOOLS.md", "- x")},
		{"fifo rule", "rules/go.md", doc("rules/go.md", "- x")},
		{"fifo card", "memory/cards/x.md", card("update-card", "x.md", goodFM, "Expected card SHA256", sum(existing))},
		{"fifo card create", "memory/cards/x.md", card("create-card", "x.md", goodFM)},
		{"dir TOOLS.md", "TOOLS.md/", doc("TOOLS.md", "- x")},
		{"dir LEARNINGS", ".learnings/LEARNINGS.md/", doc(".learnings/LEARNINGS.md", "- x")},
		{"dir card", "memory/cards/x.md/", card("update-card", "x.md", goodFM, "Expected card SHA256", sum(existing))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			p := filepath.Join(e.ws, tc.target)
			os.MkdirAll(filepath.Dir(filepath.Clean(p)), 0o755)
			if strings.HasSuffix(tc.target, "/") {
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			} else if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			e.put(e.inbox, "h.md", tc.content)
			r := wsSync(t, e)
			if len(r.Handoffs) != 1 || r.Handoffs[0].Result != "review" || r.Handoffs[0].Reason != "not-regular" {
				t.Fatalf("handoffs %+v, want review/not-regular", r.Handoffs)
			}
			fi, err := os.Lstat(filepath.Clean(p))
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(tc.target, "/") != fi.IsDir() || !fi.IsDir() && fi.Mode()&os.ModeNamedPipe == 0 {
				t.Errorf("%s was replaced (mode %v)", tc.target, fi.Mode())
			}
		})
	}
}

// TestWorkspaceSafetySymlinkedStateDirs: when .handoff/backups (or the whole
// memory directory) is a symlink leading outside, nothing is written
// there; a target whose backup cannot be made is not replaced.
func TestWorkspaceSafetySymlinkedStateDirs(t *testing.T) {
	for _, tc := range []struct{ dir, content, target, old string }{
		{".handoff/backups", doc("TOOLS.md", "- appended"), "TOOLS.md", "# Tools\n"},
		{"memory", card("create-card", "x.md", goodFM), "memory/cards/x.md", ""},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			e := newEnv(t)
			if tc.old != "" {
				e.writeWS(tc.target, tc.old)
			}
			outside := filepath.Join(e.dir, "outside")
			os.MkdirAll(outside, 0o755)
			os.MkdirAll(filepath.Dir(filepath.Join(e.ws, tc.dir)), 0o755)
			if err := os.Symlink(outside, filepath.Join(e.ws, tc.dir)); err != nil {
				t.Fatal(err)
			}
			e.put(e.inbox, "h.md", tc.content)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := Sync(ctx, Options{Manifest: e.m})
			if err != nil {
				t.Logf("Sync: %v", err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("%d entries written outside the workspace through %s", len(ents), tc.dir)
			}
			if tc.old != "" {
				if got := e.readWS(tc.target); got != tc.old {
					t.Fatalf("%s was replaced although its backup could not be made safely: %q", tc.target, got)
				}
			}
			if r != nil {
				for _, h := range r.Handoffs {
					if h.Result == "promoted" || h.Result == "routed" {
						t.Fatalf("%s %s through a symlinked %s", h.Name, h.Result, tc.dir)
					}
				}
			}
		})
	}
}

// TestWorkspaceSafetyLongNames: names at the 255-byte limit are legal card
// names and source names. Their derived names (backups, review drafts,
// archive names) must not overflow NAME_MAX and wedge the ingester: every
// handoff gets a result and the next run is clean.
func TestWorkspaceSafetyLongNames(t *testing.T) {
	cardName := strings.Repeat("c", 252) + ".md" // 255 bytes
	srcName := strings.Repeat("s", 247) + ".md"  // 250 bytes, a plain *.md name
	cases := []struct {
		name  string
		setup func(e *testEnv)
		want  map[string]string // source name → result
	}{
		{"update a 255-byte card", func(e *testEnv) {
			e.writeWS("memory/cards/"+cardName, goodFM+"\nold\n")
			e.put(e.inbox, "u.md", card("update-card", cardName, goodFM+"\nnew", "Expected card SHA256", sum(goodFM+"\nold\n")))
		}, map[string]string{"u.md": "promoted"}},
		{"250-byte source routed to review", func(e *testEnv) {
			e.put(e.inbox, srcName, doc("../x.md", "- review me"))
		}, map[string]string{srcName: "review"}},
		{"250-byte source applied", func(e *testEnv) {
			e.put(e.inbox, srcName, doc("TOOLS.md", "- long source"))
		}, map[string]string{srcName: "routed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(e)
			r := wsSync(t, e)
			got := map[string]string{}
			for _, h := range r.Handoffs {
				got[h.Name] = h.Result
			}
			problem := ""
			for n, want := range tc.want {
				if got[n] != want {
					problem += fmt.Sprintf("%.20s… got %q, want %q; ", n, got[n], want)
				}
			}
			if r.Outcome != "ok" {
				problem += fmt.Sprintf("outcome %s (%s%s)", r.Outcome, r.Error, wsHostErrors(r))
			}
			if problem != "" {
				r2 := wsSync(t, e)
				problem += fmt.Sprintf("; a second run: outcome %s (%s%s)", r2.Outcome, r2.Error, wsHostErrors(r2))
				t.Fatal(problem)
			}
		})
	}
}

func wsHostErrors(r *receipts.Receipt) string {
	s := ""
	for _, h := range r.Hosts {
		if h.Error != "" {
			s += " host " + h.Name + ": " + h.Error
		}
	}
	return s
}

// TestWorkspaceSafetyConcurrentEditor: while a run appends several
// handoffs to TOOLS.md, another writer appends its own lines to TOOLS.md
// (in a loop, and at the moment the ingester starts writing, seen through
// inotify). Invariants: no line of the other writer is lost, and no
// handoff's text appears twice; each routed handoff's text appears once.
func TestWorkspaceSafetyConcurrentEditor(t *testing.T) {
	e := newEnv(t)
	e.writeWS("TOOLS.md", "# Tools\n")
	const k = 6
	for i := 0; i < k; i++ {
		e.put(e.inbox, fmt.Sprintf("h%d.md", i), doc("TOOLS.md", fmt.Sprintf("- handoff-text-%d", i)))
	}
	tools := filepath.Join(e.ws, "TOOLS.md")
	var mu sync.Mutex
	var lines []string
	appendLine := func(s string) {
		f, err := os.OpenFile(tools, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return
		}
		defer f.Close()
		mu.Lock()
		defer mu.Unlock()
		if _, err := f.WriteString(s + "\n"); err == nil {
			lines = append(lines, s)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the editor's own pace
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			appendLine(fmt.Sprintf("- editor-line-%04d", i))
		}
	}()
	// inotify: append the moment a temporary for TOOLS.md (or its backup)
	// appears, i.e. after the ingester has read TOOLS.md and before it
	// renames the new content over it.
	ifd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(e.ws, ".handoff/backups"), 0o700)
	for _, d := range []string{e.ws, filepath.Join(e.ws, ".handoff/backups")} {
		if _, err := syscall.InotifyAddWatch(ifd, d, syscall.IN_CREATE); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		defer wg.Done()
		defer syscall.Close(ifd)
		buf := make([]byte, 64<<10)
		n := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := syscall.Read(ifd, buf)
			if err != nil || got <= 0 {
				time.Sleep(50 * time.Microsecond)
				continue
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= got; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := strings.TrimRight(string(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				off += syscall.SizeofInotifyEvent + int(ev.Len)
				if strings.HasPrefix(name, ".handoff-tmp.") && strings.HasSuffix(name, "TOOLS.md") {
					appendLine(fmt.Sprintf("- editor-inotify-%04d", n))
					n++
				}
			}
		}
	}()
	r := wsSync(t, e)
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()

	final := e.readWS("TOOLS.md")
	var lost []string
	for _, l := range lines {
		if c := strings.Count(final, l+"\n"); c != 1 {
			lost = append(lost, fmt.Sprintf("%s (%d times)", l, c))
		}
	}
	review := 0
	for i := 0; i < k; i++ {
		text := fmt.Sprintf("- handoff-text-%d", i)
		c := strings.Count(final, text)
		var res receipts.Handoff
		for _, h := range r.Handoffs {
			if h.Name == fmt.Sprintf("h%d.md", i) {
				res = h
			}
		}
		switch {
		case c > 1:
			t.Errorf("%s applied %d times", text, c)
		case res.Result == "routed" && c != 1:
			t.Errorf("%s reported routed but appears %d times", text, c)
		case res.Result == "review":
			review++
			if res.Reason != "hash-conflict" || c != 0 {
				t.Errorf("%s: review/%s with %d copies in TOOLS.md", text, res.Reason, c)
			}
		case res.Result != "routed":
			t.Errorf("%s: result %s/%s", text, res.Result, res.Reason)
		}
	}
	t.Logf("editor wrote %d lines during the run; %d of %d handoffs went to review (document moved twice)", len(lines), review, k)
	if len(lost) > 0 {
		msg := fmt.Sprintf("%d of the other writer's %d lines lost (ingester reads TOOLS.md, then renames a new file over it: appends in between vanish): %s",
			len(lost), len(lines), strings.Join(lost[:min(len(lost), 5)], ", "))
		t.Fatal(msg)
	}
}
