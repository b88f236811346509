package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/receipts"
)

// redrawEvery throttles the live block: at most this many redraws a second.
const redrawEvery = 100 * time.Millisecond

// liveProgress draws one line per host on a terminal (host, state, inboxes
// scanned, handoffs pulled) and redraws that block in place, with ANSI
// cursor movement, as the hosts move along. Redraws are throttled; Finish
// draws the final state once and leaves the cursor below the block, so the
// summary that follows prints as usual.
//
// A nil *liveProgress is valid and draws nothing: that is what every run
// without a terminal, or with --json, --quiet or --verbose, gets.
type liveProgress struct {
	w        io.Writer
	width    func() int // terminal columns; 0 when unknown
	interval time.Duration
	now      func() time.Time

	mu    sync.Mutex
	order []string
	hosts map[string]handoff.HostProgress
	drawn int       // lines of the block now on screen
	last  time.Time // when it was drawn
	dirty bool      // an update not drawn yet
	timer *time.Timer
	done  bool
}

// startProgress returns the live renderer for a sync, or nil when there must
// be no progress output at all: stdout is not a terminal (cron, pipes,
// files), TERM is dumb, the output is machine-read (--json) or silenced
// (--quiet), or --verbose logs each step to the same screen (stderr), where
// redraws and log lines would garble each other.
func (g *globals) startProgress(m *manifest.Manifest, selected []string, off bool) *liveProgress {
	if off || g.verbose || os.Getenv("TERM") == "dumb" {
		return nil
	}
	f, ok := g.stdout.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	width := func() int {
		w, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return w
	}
	names := selected
	if len(names) == 0 {
		names = m.HostNames()
	}
	return newLiveProgress(f, names, width)
}

func newLiveProgress(w io.Writer, hosts []string, width func() int) *liveProgress {
	p := &liveProgress{w: w, width: width, interval: redrawEvery, now: time.Now, hosts: map[string]handoff.HostProgress{}}
	for _, h := range hosts {
		if !slices.Contains(p.order, h) {
			p.order = append(p.order, h)
		}
	}
	return p
}

// Func is the callback for handoff.Options.Progress; nil for a nil renderer.
func (p *liveProgress) Func() func(handoff.HostProgress) {
	if p == nil {
		return nil
	}
	return p.Update
}

// Update records a host's new state and redraws, at most once per interval.
// It is safe for concurrent use.
func (p *liveProgress) Update(hp handoff.HostProgress) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	if !slices.Contains(p.order, hp.Host) {
		p.order = append(p.order, hp.Host)
	}
	if ended(p.hosts[hp.Host].State) && !ended(hp.State) {
		// A worker's last "pulling", relayed from its log, can come
		// after the run said the host is done: the end state stays.
		return
	}
	p.hosts[hp.Host] = hp
	p.dirty = true
	if p.drawn > 0 {
		if wait := p.interval - p.now().Sub(p.last); wait > 0 {
			if p.timer == nil {
				p.timer = time.AfterFunc(wait, p.tick)
			}
			return
		}
	}
	p.draw()
}

func (p *liveProgress) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	if !p.done && p.dirty {
		p.draw()
	}
}

// ended reports whether a host's state is one its pull ends in.
func ended(state string) bool {
	switch state {
	case "done", "partial", "error", "stopped":
		return true
	}
	return false
}

// Finish draws the final state (once, if anything changed since the last
// redraw) and stops redrawing; later updates are ignored. Given the run's
// receipt, each host's line is what the receipt says of it, so that no
// line is left at "pulling" whatever order the updates came in; a host
// without an end state that the receipt does not list (the run stopped
// first, or failed and has no receipt) reads "stopped". A block never
// drawn stays undrawn.
func (p *liveProgress) Finish(r *receipts.Receipt) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	if p.drawn == 0 && !p.dirty {
		return
	}
	for _, h := range p.order {
		end, ok := endState(r, h)
		if !ok {
			if ended(p.hosts[h].State) {
				continue
			}
			end = p.hosts[h]
			end.State = "stopped"
		}
		if end != p.hosts[h] {
			p.hosts[h] = end
			p.dirty = true
		}
	}
	if p.dirty {
		p.draw()
	}
}

// endState is host's line as the receipt r records it; false when r is
// nil or does not list the host.
func endState(r *receipts.Receipt, host string) (handoff.HostProgress, bool) {
	if r == nil {
		return handoff.HostProgress{}, false
	}
	for _, h := range r.Hosts {
		if h.Name != host {
			continue
		}
		hp := handoff.HostProgress{Host: host, State: "done", Inboxes: len(h.Inboxes), Pulled: h.Stored}
		switch h.Outcome {
		case receipts.HostPartial:
			hp.State, hp.Err = "partial", h.Error
		case receipts.HostError:
			hp.State, hp.Err = "error", h.Error
		}
		return hp, true
	}
	return handoff.HostProgress{}, false
}

// draw rewrites the block: up to its first line, then each line cleared and
// written anew. Called with mu held.
func (p *liveProgress) draw() {
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	nameWidth := 0
	for _, h := range p.order {
		nameWidth = max(nameWidth, min(utf8.RuneCountInString(h), 24))
	}
	cols := 0
	if p.width != nil {
		cols = p.width()
	}
	for _, h := range p.order {
		b.WriteString("\r\x1b[2K")
		b.WriteString(fit(p.line(h, nameWidth), cols))
		b.WriteString("\n")
	}
	io.WriteString(p.w, b.String())
	p.drawn = len(p.order)
	p.last = p.now()
	p.dirty = false
}

// line renders one host's state.
func (p *liveProgress) line(host string, nameWidth int) string {
	hp, ok := p.hosts[host]
	state := hp.State
	if !ok || state == "" {
		state = "waiting"
	}
	s := fmt.Sprintf("  %-*s  %-10s  inboxes %-4d  pulled %-4d", nameWidth, printable(host), printable(state), hp.Inboxes, hp.Pulled)
	if hp.Err != "" {
		s += "  " + printable(firstLine(hp.Err))
	}
	return strings.TrimRight(s, " ")
}

// fit cuts s to fewer than cols columns, so that no line wraps and the
// cursor arithmetic stays right. cols <= 0 means unknown: no cut.
func fit(s string, cols int) string {
	if cols <= 0 || utf8.RuneCountInString(s) < cols {
		return s
	}
	r := []rune(s)
	if cols < 2 {
		return ""
	}
	return string(r[:cols-2]) + "…"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
