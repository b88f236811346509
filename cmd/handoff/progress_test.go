package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-sync/handoff"
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
	p.Finish()
	p.Finish()
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
	before := out.String()
	p.Finish() // nothing new since the timed redraw: no final draw
	if out.String() != before {
		t.Fatalf("Finish redrew an unchanged block")
	}
	if got := screen(t, out.String()); len(got) != 1 || !strings.Contains(got[0], "pulling") {
		t.Fatalf("screen: %q", got)
	}
}

func TestLiveProgressNewHostAndNarrowTerminal(t *testing.T) {
	var out syncBuffer
	p := newLiveProgress(&out, []string{"a"}, func() int { return 20 })
	p.interval = 0
	p.Update(handoff.HostProgress{Host: "a", State: "connecting"})
	p.Update(handoff.HostProgress{Host: "unlisted", State: "done", Pulled: 1})
	p.Finish()
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
	p.Finish()
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
