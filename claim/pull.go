package claim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/transport"
)

// Archive directories inside an inbox.
const (
	ProcessedDir = "processed"
	MalformedDir = "malformed"
)

// Batch bounds: a pull stores and acknowledges files in groups so that one
// directory fsync and one ledger commit cover many handoffs, while memory
// stays bounded.
const (
	batchFiles = 64
	batchBytes = 16 << 20
)

// Pull runs discovery, claim, store and acknowledgement for one host and
// reports what happened. It never returns an error: a transport failure ends
// the host's pull and is recorded in the report as outcome "error".
//
// Ordering guarantee: a file is renamed on its host only after its exact
// bytes are durable in the spool and its source is recorded by rec. A crash
// at any point leaves every handoff either still in its inbox or stored (and
// then acknowledged by the next run); none is lost.
func Pull(ctx context.Context, fsys transport.FS, cfg Config, spool Spool, rec Recorder, runID string, parses func([]byte) bool) HostReport {
	p := &puller{fsys: fsys, cfg: cfg, spool: spool, rec: rec, runID: runID, parses: parses, log: cfg.Log}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if p.cfg.Now == nil {
		p.cfg.Now = time.Now
	}
	p.report = HostReport{Name: cfg.Host, Transport: cfg.Transport, Outcome: "ok"}
	if err := p.run(ctx); err != nil {
		p.report.Outcome = "error"
		p.report.Error = err.Error()
		p.log.Warn("pull failed", "host", cfg.Host, "err", err)
	}
	return p.report
}

type puller struct {
	fsys   transport.FS
	cfg    Config
	spool  Spool
	rec    Recorder
	runID  string
	parses func([]byte) bool
	log    *slog.Logger
	report HostReport

	deferred map[string]int // deferrals by reason in the current inbox
}

type claimed struct {
	src  Source
	data []byte
}

func (p *puller) run(ctx context.Context) error {
	inboxes, err := Discover(ctx, p.fsys, p.cfg)
	if err != nil {
		return err
	}
	var archiveErrs []error
	progress := func(scanned int) {
		if p.cfg.Progress != nil {
			p.cfg.Progress(scanned, p.report.Stored)
		}
	}
	for i, in := range inboxes {
		progress(i)
		ir := InboxReport{Path: in.Path, State: in.State, Tracked: in.Tracked, Ignored: in.Ignored, IgnoredCount: in.IgnoredN, Pending: len(in.Candidates)}
		if in.Err != nil {
			ir.Error = in.Err.Error()
		}
		p.report.Inboxes = append(p.report.Inboxes, ir)
		for _, q := range in.Ignored {
			p.log.Warn("ignored a name that is not a plain *.md name", "host", p.cfg.Host, "inbox", in.Path, "name", q)
		}
		if in.State != StateOK {
			p.log.Info("inbox skipped", "host", p.cfg.Host, "inbox", in.Path, "state", in.State)
			continue
		}
		if !p.cfg.DryRun {
			if err := p.confirmArchived(ctx, in); err != nil {
				return err
			}
		}
		p.deferred = map[string]int{}
		var batch []claimed
		size := 0
		flush := func() error {
			errs, err := p.store(ctx, in.Path, batch)
			archiveErrs = append(archiveErrs, errs...)
			batch, size = batch[:0], 0
			progress(i)
			return err
		}
		for _, c := range in.Candidates {
			cl, err := p.claim(ctx, in.Path, c)
			if err != nil {
				return err
			}
			if cl == nil {
				continue
			}
			batch = append(batch, *cl)
			size += len(cl.data)
			if len(batch) >= batchFiles || size >= batchBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		if n := p.deferred[ReasonTooYoung] + p.deferred[ReasonChanging]; n > 0 {
			p.log.Info("deferred to a later run", "host", p.cfg.Host, "inbox", in.Path, "too_young", p.deferred[ReasonTooYoung], "changing", p.deferred[ReasonChanging])
		}
	}
	progress(len(inboxes))
	if len(archiveErrs) > 0 {
		return fmt.Errorf("%d file(s) stored but not archived (the next run retries): %w", len(archiveErrs), archiveErrs[0])
	}
	return nil
}

// claim checks one listed entry and reads it. It returns nil when the entry
// is not to be stored now (rejected, deferred or vanished); an error only
// when the transport failed.
func (p *puller) claim(ctx context.Context, inbox string, fi transport.FileInfo) (*claimed, error) {
	name := path.Join(inbox, fi.Name)
	switch {
	case fi.IsSymlink():
		return nil, p.reject(ctx, inbox, fi, ReasonSymlink)
	case !fi.IsRegular():
		return nil, p.reject(ctx, inbox, fi, ReasonNotRegular)
	case fi.Size > p.cfg.MaxFileSize || fi.Size < 0:
		return nil, p.reject(ctx, inbox, fi, ReasonOversize)
	}
	if age := p.cfg.Now().Sub(fi.ModTime); age < p.cfg.Settle {
		p.deferItem(inbox, fi, ReasonTooYoung)
		return nil, nil
	}
	data, after, err := p.fsys.ReadFile(ctx, name, p.cfg.MaxFileSize)
	switch {
	case errors.Is(err, transport.ErrNotExist):
		p.log.Info("handoff vanished before it could be read", "host", p.cfg.Host, "name", Quote(name))
		return nil, nil
	case errors.Is(err, transport.ErrNotRegular):
		return nil, p.reject(ctx, inbox, fi, ReasonNotRegular)
	case errors.Is(err, transport.ErrTooLarge), errors.Is(err, transport.ErrChanged):
		p.deferItem(inbox, fi, ReasonChanging) // it changed since it was listed
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", Quote(name), err)
	}
	if after.Size != fi.Size || !after.ModTime.Equal(fi.ModTime) || int64(len(data)) != after.Size {
		p.deferItem(inbox, fi, ReasonChanging)
		return nil, nil
	}
	sha := Hash(data)
	src := Source{Host: p.cfg.Host, Inbox: inbox, Name: fi.Name, SHA256: sha, Size: int64(len(data)), Parses: p.parses(data)}
	dir := ProcessedDir
	if !src.Parses {
		dir = MalformedDir
	}
	src.ArchivedAs = path.Join(dir, ArchiveName(fi.Name, sha))
	return &claimed{src: src, data: data}, nil
}

// confirmArchived settles sources whose archive an earlier run did not see
// confirmed: if the source is gone from the inbox and its archive name holds
// the stored bytes, the rename happened and is recorded now. A source still
// in the inbox is claimed again as usual and acknowledged then.
func (p *puller) confirmArchived(ctx context.Context, in *Inbox) error {
	srcs, err := p.rec.Unarchived(ctx, p.cfg.Host, in.Path)
	if err != nil || len(srcs) == 0 {
		return err
	}
	present := map[string]bool{}
	for _, c := range in.Candidates {
		present[c.Name] = true
	}
	var done []Source
	for _, s := range srcs {
		if present[s.Name] || s.ArchivedAs == "" {
			continue
		}
		same, err := sameContent(ctx, p.fsys, path.Join(in.Path, s.ArchivedAs), s.SHA256, s.Size)
		if err != nil && !errors.Is(err, transport.ErrNotExist) {
			if ctx.Err() != nil || errors.Is(err, transport.ErrBroken) {
				return err
			}
			continue
		}
		if same {
			done = append(done, s)
		}
	}
	if len(done) > 0 {
		p.log.Info("confirmed archives an earlier run could not", "host", p.cfg.Host, "inbox", in.Path, "count", len(done))
		return p.rec.MarkArchived(ctx, done)
	}
	return nil
}

// ArchiveName is the name a stored handoff gets in processed/ or malformed/
// (and its review draft): <stem>.<sha12>.md, the stem shortened on a UTF-8
// boundary when the whole would not fit in MaxNameBytes.
func ArchiveName(name, sha string) string {
	return fitName(strings.TrimSuffix(name, ".md"), "."+sha[:12]+".md")
}

// fitName joins stem and suffix, cutting the stem so that the result is at
// most MaxNameBytes long.
func fitName(stem, suffix string) string {
	if room := MaxNameBytes - len(suffix); len(stem) > room {
		stem = strings.ToValidUTF8(stem[:room], "")
		for !utf8.ValidString(stem) || len(stem) > room {
			stem = stem[:len(stem)-1]
		}
	}
	return stem + suffix
}

// store makes a batch durable, records it, then archives each source. It
// returns the per-file archive failures (the files stay in the inbox and are
// retried) and an error only when storing failed.
func (p *puller) store(ctx context.Context, inbox string, batch []claimed) ([]error, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	srcs := make([]Source, len(batch))
	contents := make(map[string][]byte, len(batch))
	for i, c := range batch {
		srcs[i] = c.src
		contents[c.src.SHA256] = c.data
	}
	if err := p.spool.Put(contents); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	n, err := p.rec.RecordSources(ctx, p.runID, srcs)
	if err != nil {
		return nil, fmt.Errorf("store: record sources: %w", err)
	}
	p.report.Stored += n
	if p.cfg.DryRun {
		return nil, nil
	}
	failpoint.Inject("store.recorded")

	var errs []error
	var done []Source
	for _, c := range batch {
		if err := p.archive(ctx, inbox, c); err != nil {
			if ctx.Err() != nil || errors.Is(err, transport.ErrBroken) {
				// The connection is gone: say so, with what is left over.
				return errs, fmt.Errorf("%w (%d of %d in this batch stored but not yet archived; the next run finishes them)", err, len(batch)-len(done), len(batch))
			}
			p.log.Warn("archive failed", "host", p.cfg.Host, "name", Quote(path.Join(inbox, c.src.Name)), "err", err)
			errs = append(errs, err)
			continue
		}
		done = append(done, c.src)
		failpoint.Inject("ack.renamed")
	}
	if len(done) > 0 {
		if err := p.rec.MarkArchived(ctx, done); err != nil {
			return errs, fmt.Errorf("record archive: %w", err)
		}
	}
	return errs, nil
}

// archive renames a stored source to its archive name. A destination that
// already holds the same bytes means an earlier run got this far: the source
// copy is then removed.
func (p *puller) archive(ctx context.Context, inbox string, c claimed) error {
	dir := path.Join(inbox, path.Dir(c.src.ArchivedAs))
	if err := ensureDir(ctx, p.fsys, dir); err != nil {
		return err
	}
	src := path.Join(inbox, c.src.Name)
	dst := path.Join(inbox, c.src.ArchivedAs)
	err := p.fsys.Rename(ctx, src, dst)
	switch {
	case err == nil:
		// The name was claimed, not the bytes: a writer may have replaced
		// the file since it was read. Check what was archived; if it is
		// not what was stored, put it back for the next run to claim.
		same, err := sameContent(ctx, p.fsys, dst, c.src.SHA256, int64(len(c.data)))
		if err != nil {
			return fmt.Errorf("archive %s: verify: %w", Quote(src), err)
		}
		if !same {
			if err := p.fsys.Rename(ctx, dst, src); err != nil {
				return fmt.Errorf("archive %s: it changed after it was read, and putting it back failed: %w", Quote(src), err)
			}
			return fmt.Errorf("archive %s: it changed after it was read; left in place for the next run", Quote(src))
		}
		return nil
	case errors.Is(err, transport.ErrExist):
		same, err := sameContent(ctx, p.fsys, dst, c.src.SHA256, int64(len(c.data)))
		if err != nil {
			return fmt.Errorf("archive %s: %w", Quote(src), err)
		}
		if !same {
			return fmt.Errorf("archive %s: %s already holds different content; move it aside", Quote(src), Quote(dst))
		}
		// Remove the inbox copy only if it still holds the stored bytes.
		if same, err := sameContent(ctx, p.fsys, src, c.src.SHA256, int64(len(c.data))); err != nil || !same {
			if errors.Is(err, transport.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("archive %s: it changed after it was read; left in place for the next run", Quote(src))
		}
		if err := p.fsys.Remove(ctx, src); err != nil && !errors.Is(err, transport.ErrNotExist) {
			return fmt.Errorf("archive %s: remove copy already archived: %w", Quote(src), err)
		}
		return nil
	case errors.Is(err, transport.ErrNotExist):
		p.log.Info("handoff vanished before it could be archived", "host", p.cfg.Host, "name", Quote(src))
		return nil
	default:
		return fmt.Errorf("archive %s: %w", Quote(src), err)
	}
}

func sameContent(ctx context.Context, fsys transport.FS, name, sha string, size int64) (bool, error) {
	data, _, err := fsys.ReadFile(ctx, name, size)
	if errors.Is(err, transport.ErrTooLarge) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return Hash(data) == sha, nil
}

// ensureDir makes sure dir is a real directory (never a symlink).
func ensureDir(ctx context.Context, fsys transport.FS, dir string) error {
	fi, err := fsys.Lstat(ctx, dir)
	if errors.Is(err, transport.ErrNotExist) {
		err = fsys.Mkdir(ctx, dir)
		if err == nil {
			return nil
		}
		if !errors.Is(err, transport.ErrExist) {
			return fmt.Errorf("mkdir %s: %w", Quote(dir), err)
		}
		fi, err = fsys.Lstat(ctx, dir)
	}
	if err != nil {
		return fmt.Errorf("lstat %s: %w", Quote(dir), err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (a symlink or file is in the way; remove it)", Quote(dir))
	}
	return nil
}

// reject records a file that must not be read and moves it, unread, into
// malformed/ under its own name (with .1, .2, … if taken).
func (p *puller) reject(ctx context.Context, inbox string, fi transport.FileInfo, reason string) error {
	item := Item{Inbox: inbox, Name: fi.Name, Size: fi.Size, Result: ResultRejected, Reason: reason}
	p.log.Warn("rejected", "host", p.cfg.Host, "name", Quote(path.Join(inbox, fi.Name)), "reason", reason)
	if p.cfg.DryRun {
		item.ArchivedAs = path.Join(MalformedDir, fi.Name)
		p.addItem(item)
		return nil
	}
	as, err := p.moveRejected(ctx, inbox, fi.Name)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		item.Error = err.Error()
	}
	item.ArchivedAs = as
	p.addItem(item)
	return nil
}

func (p *puller) moveRejected(ctx context.Context, inbox, name string) (string, error) {
	dir := path.Join(inbox, MalformedDir)
	if err := ensureDir(ctx, p.fsys, dir); err != nil {
		return "", err
	}
	stem := strings.TrimSuffix(name, ".md")
	for i := 0; i < 100; i++ {
		as := name
		if i > 0 {
			as = fitName(stem, "."+strconv.Itoa(i)+".md")
		}
		err := p.fsys.Rename(ctx, path.Join(inbox, name), path.Join(dir, as))
		if err == nil {
			return path.Join(MalformedDir, as), nil
		}
		if !errors.Is(err, transport.ErrExist) {
			return "", fmt.Errorf("move %s into malformed/: %w", Quote(name), err)
		}
	}
	return "", fmt.Errorf("move %s into malformed/: 100 names taken", Quote(name))
}

// deferItem leaves a file for a later run. Deferrals are logged once per
// inbox (see run), not per file: an inbox of fresh files is common, and a
// host must not flood the log.
func (p *puller) deferItem(inbox string, fi transport.FileInfo, reason string) {
	p.deferred[reason]++
	p.addItem(Item{Inbox: inbox, Name: fi.Name, Size: fi.Size, Result: ResultDeferred, Reason: reason})
}

// addItem keeps at most MaxItems items in the report and counts the rest,
// so that a host with a flood of unusable files cannot grow it without
// bound.
func (p *puller) addItem(it Item) {
	if len(p.report.Items) >= MaxItems {
		p.report.ItemsDropped++
		return
	}
	it.Error = clip(it.Error, maxErrText)
	p.report.Items = append(p.report.Items, it)
}
