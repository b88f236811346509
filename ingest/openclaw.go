package ingest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/openclaw"
	"github.com/handoff-sync/handoff/receipts"
)

// OpenClawOptions say how the ingester treats OpenClaw, the program that
// reads the workspace (docs/openclaw.md).
type OpenClawOptions struct {
	// Layout pins the layout ("2026.9", "pre-2026.9"); "" or "auto"
	// detects it (openclaw.Detect).
	Layout string
	// Config is OpenClaw's config file; "" finds it where OpenClaw does.
	Config string
	// CardIndex keeps the index of the cards in MEMORY.md up to date.
	CardIndex bool
}

// ReaderFile is handoff's note of what it has seen of the workspace's
// OpenClaw, under .handoff: the layout once it was seen to be 2026.9
// (OpenClaw never goes back to TOOLS.md), and the card index it last
// wrote.
const ReaderFile = layout.StateDir + "/openclaw.json"

// readerState is ReaderFile's content.
type readerState struct {
	Layout openclaw.Layout `json:"layout,omitempty"`
	SeenAt string          `json:"seen_at,omitempty"`
	Why    string          `json:"why,omitempty"`
	// The card index as last written: the cards directory's
	// modification time then, and the index block's SHA-256.
	CardsMTime int64  `json:"cards_mtime_ns,omitempty"`
	IndexSHA   string `json:"index_sha256,omitempty"`
}

// readerView is what the ingester knows of the OpenClaw that reads the
// workspace.
type readerView struct {
	det    openclaw.Detection
	caps   openclaw.Caps
	cfg    *openclaw.Config
	cfgErr error
	abs    string
	state  readerState
}

// IndexResult is what updateCardIndex did to MEMORY.md.
type IndexResult = receipts.CardIndex

// Reader says what the ingester found of OpenClaw and did for it, as the
// receipt has it.
func (in *Ingester) Reader() *receipts.OpenClaw {
	r := &receipts.OpenClaw{Layout: string(in.oc.det.Layout), Why: in.oc.det.Why, CardIndex: in.cardIndex, MovedDrafts: in.movedDrafts}
	if in.oc.cfg != nil {
		r.Config = in.oc.cfg.Path
	}
	if in.oc.cfgErr != nil {
		r.ConfigError = in.oc.cfgErr.Error()
	}
	return r
}

// detectReader works out the layout (openclaw.Detect) from the manifest's
// pin, ReaderFile, the workspace's AGENTS.md and TOOLS.md, and
// OpenClaw's config, and notes a 2026.9 layout in ReaderFile so that it
// sticks.
func (in *Ingester) detectReader() readerView {
	v := readerView{abs: in.ws.dir, caps: openclaw.DefaultCaps}
	if data, ok, err := in.ws.read(ReaderFile); err == nil && ok {
		if err := json.Unmarshal(data, &v.state); err != nil {
			in.log.Warn("handoff's note of the workspace's OpenClaw is not JSON; detecting again", "file", ReaderFile, "err", err)
			v.state = readerState{}
		}
	}
	home, _ := os.UserHomeDir()
	cfg, _, err := openclaw.Find(in.opts.OpenClaw.Config, os.Getenv, home)
	switch {
	case cfg == nil && err == nil:
	case err != nil:
		v.cfgErr = err
		in.log.Warn("OpenClaw's config cannot be read; its layout and limits are taken from the workspace", "err", err)
	default:
		v.cfg = cfg
		v.caps.File = cmp.Or(cfg.Caps.File, v.caps.File)
		v.caps.Total = cmp.Or(cfg.Caps.Total, v.caps.Total)
	}
	agents, _, _ := in.ws.read(openclaw.AgentsFile)
	v.det = openclaw.Detect(openclaw.Layout(in.opts.OpenClaw.Layout), v.state.Layout, agents, v.cfg)
	if v.det.Layout == openclaw.LayoutAgents && v.state.Layout != openclaw.LayoutAgents && !in.opts.DryRun {
		v.state.Layout, v.state.Why, v.state.SeenAt = v.det.Layout, v.det.Why, time.Now().UTC().Format(time.RFC3339)
		if err := in.saveReaderState(v.state); err != nil {
			in.log.Warn("cannot note the workspace's OpenClaw layout", "file", ReaderFile, "err", err)
		}
	}
	return v
}

func (in *Ingester) saveReaderState(st readerState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return in.ws.write(ReaderFile, append(data, '\n'))
}

// target is where a note for a document target lands.
func (v readerView) target(t string) string { return openclaw.Target(v.det.Layout, t) }

// overflow reports the bootstrap file that writing next to target would
// leave cut, when target is one OpenClaw loads at a session's start.
// The budgets are OpenClaw 2026.9's, measured; an older layout keeps the
// behaviour it had (no cap is applied).
func (v readerView) overflow(target string, next []byte, read readFunc) (openclaw.Loaded, bool) {
	if v.det.Layout != openclaw.LayoutAgents || !slices.Contains(openclaw.Bootstrap(v.det.Layout), target) {
		return openclaw.Loaded{}, false
	}
	files := map[string]viewed{}
	get := func(name string) ([]byte, bool) {
		f, ok := files[name]
		if !ok {
			var err error
			if f, err = read(name); err != nil {
				f = viewed{}
			}
			files[name] = f
		}
		return f.data, f.exists
	}
	before := openclaw.Budget(v.det.Layout, v.caps, v.abs, get)
	after := openclaw.Budget(v.det.Layout, v.caps, v.abs, func(name string) ([]byte, bool) {
		if name == target {
			return next, true
		}
		return get(name)
	})
	return openclaw.Overflow(before, after, target)
}

// capMessage words ReasonBootstrapCap for a person, with the sizes.
func capMessage(target string, f openclaw.Loaded) string {
	if f.Name == "" {
		return Reasons[ReasonBootstrapCap]
	}
	if f.Skipped {
		return fmt.Sprintf("with this note in %s, OpenClaw's 60,000-character budget for the files it loads at a session's start runs out before %s, which would not be loaded at all; make room (docs/openclaw.md), then accept", target, f.Name)
	}
	what := "its first 75% and last 25%"
	if f.Name == openclaw.AgentsFile {
		what = "its head, a digest of its rules and its tail"
	}
	return fmt.Sprintf("with this note %s would be %d characters; OpenClaw loads %d of it at a session's start (%s), so the rest would reach no session: make room in %s, or edit the note shorter, then accept",
		f.Name, f.Chars, f.Cap, what, f.Name)
}

// Index bounds: the most cards looked at for their topics, and the most
// of one card read for its front matter.
const (
	indexMaxRead  = 200
	indexCardRead = 16 << 10
)

// updateCardIndex brings the card index in MEMORY.md up to date when a
// card changed in this run, the cards directory changed since the index
// was written, or the index in MEMORY.md is not the one handoff wrote.
// MEMORY.md is backed up, and replaced only while it still holds what the
// index was made on; OpenClaw's own text around the index is kept. A crash
// leaves the old or the new MEMORY.md, and the next run makes it again.
func (in *Ingester) updateCardIndex() error {
	if in.opts.DryRun || !in.opts.OpenClaw.CardIndex {
		return nil
	}
	root := in.ws.root
	mtime := int64(0)
	if fi, err := root.Lstat(layout.CardsDir); err == nil && fi.IsDir() {
		mtime = fi.ModTime().UnixNano()
	}
	for attempt := 0; attempt < 2; attempt++ {
		cur, exists, err := in.ws.read(openclaw.MemoryFile)
		if reason, err := unsafeReason(err); err != nil || reason != "" {
			in.log.Warn("MEMORY.md cannot be written safely; the card index is left as it is", "reason", reason, "err", err)
			return err
		}
		have := openclaw.Index(cur)
		if !in.cardsChanged && have != "" && hash([]byte(have)) == in.oc.state.IndexSHA && mtime == in.oc.state.CardsMTime {
			return nil
		}
		cards, total, err := in.indexCards()
		if err != nil {
			return err
		}
		if total == 0 && have == "" {
			return nil // no cards and no index: nothing to say, no MEMORY.md made
		}
		next, shown := in.withIndex(cur, cards, total)
		block := openclaw.Index(next)
		st := in.oc.state
		st.CardsMTime, st.IndexSHA = mtime, hash([]byte(block))
		if bytes.Equal(next, cur) {
			if st == in.oc.state {
				return nil
			}
			in.oc.state = st
			return in.saveReaderState(st)
		}
		before := ""
		backup := ""
		if exists {
			before = hash(cur)
			// One backup, replaced each time: handoff changes only the
			// index, which is derived from the cards, so the last
			// MEMORY.md before its last write is the one worth keeping,
			// and a year of timer runs does not pile up copies.
			backup = "index." + openclaw.MemoryFile
			if err := in.ws.write(layout.BackupsDir+"/"+backup, cur); err != nil {
				return fmt.Errorf("ingest: back up %s: %w", openclaw.MemoryFile, err)
			}
		}
		late, err := in.ws.replaceIf(openclaw.MemoryFile, next, func(old []byte, existed bool) bool {
			return existed == exists && (!exists || hash(old) == before)
		})
		if len(late) > 0 {
			// OpenClaw appended to MEMORY.md in the instant it was
			// replaced: keep its text, as for any target.
			name, serr := in.saveLate(openclaw.MemoryFile, late)
			if serr != nil {
				return serr
			}
			in.keepLate(openclaw.MemoryFile, late, name)
		}
		if errors.Is(err, durable.ErrConflict) {
			continue // OpenClaw wrote MEMORY.md meanwhile: once more
		}
		if err != nil {
			return fmt.Errorf("ingest: write %s: %w", openclaw.MemoryFile, err)
		}
		in.cardIndex = &IndexResult{BeforeSHA256: before, AfterSHA256: hash(next), Cards: total, Shown: shown, Backup: backup}
		in.oc.state = st
		return in.saveReaderState(st)
	}
	in.log.Warn("MEMORY.md kept changing while the card index was written; the next run tries again")
	return nil
}

// withIndex is MEMORY.md with the index of cards in it, within
// openclaw.IndexBudget and within what OpenClaw loads: the budget is
// halved until MEMORY.md and the other loaded files stay whole, down to
// the count alone. It returns the content and how many cards it names.
func (in *Ingester) withIndex(cur []byte, cards []openclaw.IndexCard, total int) ([]byte, int) {
	read := func(name string) (viewed, error) {
		if name == openclaw.MemoryFile {
			return viewed{data: cur, exists: cur != nil}, nil
		}
		return in.readDisk(name)
	}
	var next []byte
	for budget := openclaw.IndexBudget; ; budget /= 2 {
		if budget < 200 {
			budget = 0
		}
		block := openclaw.RenderIndex(cards, total, budget)
		next = openclaw.SetIndex(cur, block)
		if _, over := in.oc.overflow(openclaw.MemoryFile, next, read); !over || budget == 0 {
			return next, strings.Count(block, "\n- ") - strings.Count(block, "\n- … and")
		}
	}
}

// indexCards lists the cards newest first (by modification time, then
// name), with the topics of as many as the index can show, and how many
// there are.
func (in *Ingester) indexCards() ([]openclaw.IndexCard, int, error) {
	dir, err := openDirNoFollow(in.ws.root, layout.CardsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("ingest: %s: %w", layout.CardsDir, err)
	}
	defer dir.Close()
	ents, err := dir.ReadDir(-1)
	if err != nil {
		return nil, 0, fmt.Errorf("ingest: list %s: %w", layout.CardsDir, err)
	}
	type card struct {
		name  string
		mtime time.Time
	}
	var cards []card
	for _, e := range ents {
		if !e.Type().IsRegular() || !isCardName(e.Name()) || durable.IsTemp(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		cards = append(cards, card{e.Name(), fi.ModTime()})
	}
	slices.SortFunc(cards, func(a, b card) int {
		return cmp.Or(b.mtime.Compare(a.mtime), strings.Compare(a.name, b.name))
	})
	out := make([]openclaw.IndexCard, 0, min(len(cards), indexMaxRead))
	for _, c := range cards[:min(len(cards), indexMaxRead)] {
		out = append(out, openclaw.IndexCard{Name: c.name, Topic: in.cardTopic(c.name)})
	}
	return out, len(cards), nil
}

// cardTopic is a card's front matter topic, "" when it has none that
// reads.
func (in *Ingester) cardTopic(name string) string {
	f, err := in.ws.open(filepath.ToSlash(layout.CardsDir+"/"+name), os.O_RDONLY)
	if f == nil || err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, indexCardRead)
	n, _ := f.Read(buf)
	fm, p := FrontMatter(string(buf[:n]))
	if p != nil {
		return ""
	}
	t, _ := fm["topic"].(string)
	return t
}
