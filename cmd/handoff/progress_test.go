package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/receipts"
)

// syncBuffer is a bytes.Buffer safe for the renderer's timer goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// screen replays the renderer's output on a tiny terminal model that knows
// exactly the sequences it may use (CR, LF, cursor up, erase line), and
// returns the lines left on screen. Any other escape sequence fails the
// test.
func screen(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	row, col := 0, 0
	put := func(r rune) {
		for len(lines) <= row {
			lines = append(lines, "")
		}
		l := []rune(lines[row])
		for len(l) < col {
			l = append(l, ' ')
		}
		if col < len(l) {
			l[col] = r
		} else {
			l = append(l, r)
		}
		lines[row] = string(l)
		col++
	}
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; r {
		case '\r':
			col = 0
		case '\n':
			row, col = row+1, 0
		case 0x1b:
			j := i + 1
			if j >= len(rs) || rs[j] != '[' {
				t.Fatalf("bare ESC in output %q", out)
			}
			j++
			n := 0
			for j < len(rs) && rs[j] >= '0' && rs[j] <= '9' {
				n = n*10 + int(rs[j]-'0')
				j++
			}
			if j >= len(rs) {
				t.Fatalf("unterminated escape in %q", out)
			}
			switch rs[j] {
			case 'A':
				row -= n
				if row < 0 {
					t.Fatalf("cursor moved above the block in %q", out)
				}
			case 'K':
				if n != 2 {
					t.Fatalf("unexpected erase %d", n)
				}
				for len(lines) <= row {
					lines = append(lines, "")
				}
				lines[row] = ""
			default:
				t.Fatalf("unexpected escape sequence %q in %q", string(rs[i:j+1]), out)
			}
			i = j
		default:
			if r < 0x20 || r == 0x7f {
				t.Fatalf("control character %q in output %q", r, out)
			}
			put(r)
		}
	}
	if col != 0 {
		t.Fatalf("cursor left mid-line (col %d) in %q", col, out)
	}
	if row != len(lines) {
		t.Fatalf("cursor on row %d, want below the block (%d lines)", row, len(lines))
	}
	return lines
}

func TestLiveProgressRedrawsInPlace(t *testing.T) {
	var out syncBuffer
	p := newLiveProgress(&out, []string{"laptop", "vps", "laptop"}, func() int { return 100 })
	p.interval = time.Hour // no timed redraws: only the first and the final one
	p.Update(handoff.HostProgress{Host: "laptop", State: "connecting"})
	first := out.String()
	if got := screen(t, first); len(got) != 2 || !strings.Contains(got[0], "laptop") || !strings.Contains(got[0], "connecting") || !strings.Contains(got[1], "waiting") {
		t.Fatalf("first draw:\n%s", strings.Join(got, "\n"))
	}
	for i := range 50 {
		p.Update(handoff.HostProgress{Host: "laptop", State: "pulling", Inboxes: i, Pulled: 2 * i})
		p.Update(handoff.HostProgress{Host: "vps", State: "pulling", Inboxes: 1})
	}
	if out.String() != first {
		t.Fatalf("redrew within the throttle interval:\n%q", out.String())
	}
	p.Update(handoff.HostProgress{Host: "laptop", State: "done", Inboxes: 3, Pulled: 12})
	p.Update(handoff.HostProgress{Host: "vps", State: "error", Inboxes: 1, Err: "dial: refused\x1b[31m\nhint: trust it"})
	p.Finish(nil)
	p.Finish(nil)
	p.Update(handoff.HostProgress{Host: "vps", State: "pulling"}) // after Finish: ignored
	all := out.String()
	if n := strings.Count(all, "\x1b[2A"); n != 1 {
		t.Fatalf("final state drawn %d times, want once:\n%q", n, all)
	}
	got := screen(t, all)
	want := []string{
		"  laptop  done        inboxes 3     pulled 12",
		"  vps     error       inboxes 1     pulled 0     dial: refused\\x1b[31m",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("screen:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLiveProgressThrottledRedraw(t *testing.T) {
	var out syncBuffer
	p := newLiveProgress(&out, []string{"a"}, nil)
	p.interval = 20 * time.Millisecond
	p.Update(handoff.HostProgress{Host: "a", State: "connecting"})
	p.Update(handoff.HostProgress{Host: "a", State: "pulling", Inboxes: 7})
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "inboxes 7") {
		if time.Now().After(deadline) {
			t.Fatalf("the throttled update was never drawn:\n%q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Finish(nil) // no receipt: the run failed, and the line says it stopped
	if got := screen(t, out.String()); len(got) != 1 || !strings.Contains(got[0], "stopped") || !strings.Contains(got[0], "inboxes 7") {
		t.Fatalf("screen: %q", got)
	}
}

// TestLiveProgressEndsAtEndState: the final render shows every host's end
// state, whatever order updates came in (issue 48, item 7: three runs in
// four were left at "pulling"). Invariant: after Finish with the
// receipt, no line reads "pulling" or "connecting", and each line is the
// receipt's outcome for its host. No timers: the interval is an hour and
// every draw is the first one or Finish's.
func TestLiveProgressEndsAtEndState(t *testing.T) {
	var out syncBuffer
	p := newLiveProgress(&out, []string{"laptop", "vps", "nas", "gone"}, func() int { return 200 })
	p.interval = time.Hour
	for _, h := range []string{"laptop", "vps", "nas", "gone"} {
		p.Update(handoff.HostProgress{Host: h, State: "connecting"})
	}
	// laptop: the run's "done" first, then the worker's last relayed
	// "pulling" (the race a terminal showed).
	p.Update(handoff.HostProgress{Host: "laptop", State: "done", Inboxes: 2, Pulled: 5})
	p.Update(handoff.HostProgress{Host: "laptop", State: "pulling", Inboxes: 2, Pulled: 4})
	// vps: its end update never came (a run stopped while it pulled).
	p.Update(handoff.HostProgress{Host: "vps", State: "pulling", Inboxes: 1, Pulled: 1})
	// nas: ended in error. gone: not in the receipt, never ended.
	p.Update(handoff.HostProgress{Host: "nas", State: "error", Err: "dial: refused"})
	r := &receipts.Receipt{Hosts: []receipts.Host{
		{Name: "laptop", Outcome: "ok", Stored: 5, Inboxes: make([]receipts.Inbox, 2)},
		{Name: "vps", Outcome: receipts.HostPartial, Stored: 1, Inboxes: make([]receipts.Inbox, 1), Error: "run canceled"},
		{Name: "nas", Outcome: receipts.HostError, Error: "dial: refused"},
	}}
	p.Finish(r)
	got := screen(t, out.String())
	want := []string{
		"  laptop  done        inboxes 2     pulled 5",
		"  vps     partial     inboxes 1     pulled 1     run canceled",
		"  nas     error       inboxes 0     pulled 0     dial: refused",
		"  gone    stopped     inboxes 0     pulled 0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("screen:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLiveProgressUndrawnStaysUndrawn: a run that failed before any host
// moved (the lock was held) prints no block at Finish.
func TestLiveProgressUndrawnStaysUndrawn(t *testing.T) {
	var out syncBuffer
	p := newLiveProgress(&out, []string{"a", "b"}, nil)
	p.Finish(nil)
	if out.String() != "" {
		t.Fatalf("Finish drew a block no update started: %q", out.String())
	}
}

func TestLiveProgressNewHostAndNarrowTerminal(t *testing.T) {
	var out syncBuffer
	p := newLiveProgress(&out, []string{"a"}, func() int { return 20 })
	p.interval = 0
	p.Update(handoff.HostProgress{Host: "a", State: "connecting"})
	p.Update(handoff.HostProgress{Host: "unlisted", State: "done", Pulled: 1})
	p.Finish(nil)
	got := screen(t, out.String())
	if len(got) != 2 {
		t.Fatalf("screen: %q", got)
	}
	for _, l := range got {
		if n := len([]rune(l)); n >= 20 {
			t.Fatalf("line %q is %d columns on a 20-column terminal: it would wrap", l, n)
		}
	}
}

func TestNilProgressIsInert(t *testing.T) {
	var p *liveProgress
	if p.Func() != nil {
		t.Fatal("a nil renderer must give Sync no callback")
	}
	p.Update(handoff.HostProgress{Host: "a"})
	p.Finish(nil)
}

// TestNoProgressWithoutTerminal: a buffer (no terminal), --json/--quiet and
// --verbose all get no renderer.
func TestNoProgressWithoutTerminal(t *testing.T) {
	g := &globals{stdout: &bytes.Buffer{}}
	if g.startProgress(nil, []string{"a"}, false) != nil {
		t.Fatal("progress on a non-terminal stdout")
	}
	g = &globals{stdout: &bytes.Buffer{}, verbose: true}
	if g.startProgress(nil, []string{"a"}, true) != nil {
		t.Fatal("progress with --verbose")
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"}, {34 * 1024, "34 KiB"}, {5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"},
	} {
		if got := formatBytes(tt.n); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
