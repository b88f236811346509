package where

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/receipts"
)

// The words of where: one match as `handoff where` prints it.

// WriteMatch prints one match: a header host:path, then one indented
// "label: value" line per fact.
func WriteMatch(w io.Writer, m Match) {
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "  %-12s %s\n", label+":", fmt.Sprintf(format, args...))
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "(unknown time)"
		}
		return t.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "%s:%s\n", claim.Printable(m.Host), claim.Printable(m.Path))
	if m.Kind == Rejected {
		line("result", "rejected (%s): never read", m.Reason)
		if m.ArchivedAs != "" {
			line("archived as", "%s", claim.Printable(m.ArchivedAs))
		} else {
			line("archived as", "(not moved: the move into malformed/ failed; see that run's log)")
		}
		line("size", "%d bytes", m.Size)
		line("seen", "%s by run %s", ts(m.StoredAt), m.IngestRun)
		return
	}
	switch {
	case m.Result == "":
		line("result", "not ingested yet (stored; the next sync ingests it)")
	case m.Result == ingest.ResultDuplicate && m.AppliedFrom != nil:
		a := m.AppliedFrom
		res := a.Result
		if a.Reason != "" {
			res += " (" + a.Reason + ")"
		}
		line("result", "duplicate: the same bytes were ingested from %s:%s: %s", claim.Printable(a.Host), claim.Printable(a.Path), res)
	case m.Result == receipts.ResultLegacy:
		line("result", "legacy: found archived in processed/ and recorded as ingested before by `handoff import processed`; never applied by handoff")
	case m.Result == ingest.ResultReview:
		line("result", "%s (%s)", m.Result, m.Reason)
		if why := ingest.Reasons[m.Reason]; why != "" && m.Waiting {
			line("waits", "for a person: %s", why)
		} else if why != "" {
			// Decided (the decision lines below): it waited, no more.
			line("why", "%s", why)
		}
	case m.Reason != "":
		line("result", "%s (%s)", m.Result, m.Reason)
	case m.Result == ingest.ResultPromoted && m.Action != "":
		line("result", "%s (%s)", m.Result, m.Action)
	default:
		line("result", "%s", m.Result)
	}
	if m.Result != "" {
		switch {
		case m.Target != "" && m.AppliedFrom != nil:
			line("target", "%s (by the copy that was ingested)", m.Target)
		case strings.HasPrefix(m.Target, layout.ReviewDir+"/"):
			if d := lastDone(m.Decisions); d != nil && !m.Waiting {
				line("target", "none now: its review draft %s was taken out of the review inbox when it was %s", m.Target, d.Decision)
			} else {
				line("target", "%s (review draft)", m.Target)
			}
		case m.Target != "":
			line("target", "%s", m.Target)
		case m.Result == ingest.ResultMalformed:
			line("target", "none: quarantined in the store (`handoff where --bytes %s` prints it)", m.SHA256[:12])
		}
		if m.AfterSHA256 != "" {
			before := m.BeforeSHA256
			if before == "" {
				before = "(new file)"
			}
			line("before", "%s", before)
			line("after", "%s", m.AfterSHA256)
		}
	}
	if e := m.EditedFrom; e != nil {
		line("edited from", "%s by %s at %s (run %s)%s", e.OriginalSHA256, claim.Printable(e.By), ts(e.At), e.RunID, noteOf(e.Note))
	}
	for _, d := range m.Decisions {
		writeDecision(line, d, ts)
	}
	arch := claim.Printable(m.ArchivedAs)
	switch {
	case m.EditedFrom != nil && m.ArchivedAs == "":
		arch = "(none: written by `handoff review edit`, never on a host)"
	case !m.Archived:
		arch += " (rename not confirmed yet; the next sync finishes it)"
	}
	line("archived as", "%s", arch)
	writeThreads(line, m)
	line("sha256", "%s (%d bytes)", m.SHA256, m.Size)
	line("stored", "%s by run %s", ts(m.StoredAt), m.StoredRun)
	if m.Result != "" {
		line("ingested", "%s by run %s", ts(m.IngestedAt), m.IngestRun)
	}
}

// lastDone is the newest done decision among ds, or nil.
func lastDone(ds []Decision) *Decision {
	for i := len(ds) - 1; i >= 0; i-- {
		if ds[i].State == "done" {
			return &ds[i]
		}
	}
	return nil
}

// writeDecision prints one review decision of a match.
func writeDecision(line func(label, format string, args ...any), d Decision, ts func(time.Time) string) {
	state := ""
	switch d.State {
	case "started":
		state = " (interrupted; the next `handoff review` command or sync finishes it)"
	case "abandoned":
		state = " (abandoned: the target changed while it was written; it waited again)"
	}
	waited := d.WaitedAs
	if d.Reason != "" {
		waited += " (" + d.Reason + ")"
	}
	line("decision", "%s by %s at %s (run %s)%s", d.Decision, claim.Printable(d.By), ts(d.At), d.RunID, state)
	line("waited as", "%s", waited)
	if d.Note != "" {
		line("note", "%s", claim.Printable(d.Note))
	}
	if len(d.Overrides) > 0 {
		line("overriding", "%s", strings.Join(d.Overrides, ", "))
	}
	if d.EditedSHA256 != "" {
		line("edited into", "%s", d.EditedSHA256)
	}
	if d.Decision == "rejected" && d.Target != "" {
		before := d.BeforeSHA256
		if before == "" {
			before = "(absent)"
		}
		line("target", "%s, %s when rejected (unchanged)", d.Target, before)
	}
}

func noteOf(n string) string {
	if n == "" {
		return ""
	}
	return fmt.Sprintf(", note %q", n)
}

// writeThreads prints what a match continues and what continues it.
func writeThreads(line func(label, format string, args ...any), m Match) {
	if t := m.Continues; t != nil {
		if len(t.Sources) == 0 {
			line("continues", "%s (no handoff of that name or hash in the ledger)", claim.Printable(t.Key))
		}
		for _, s := range t.Sources {
			line("continues", "%s: %s:%s (%s)", claim.Printable(t.Key), claim.Printable(s.Host), claim.Printable(s.Path), resultText(s))
		}
	}
	for _, t := range m.ContinuedBy {
		for _, s := range t.Sources {
			line("continued by", "%s:%s (%s)", claim.Printable(s.Host), claim.Printable(s.Path), resultText(s))
		}
	}
}

func resultText(s Source) string {
	switch {
	case s.Result == "":
		return "not ingested yet"
	case s.Reason != "":
		return s.Result + ", " + s.Reason
	}
	return s.Result
}
