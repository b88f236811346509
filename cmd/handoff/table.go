package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// maxTableRows bounds the table a run prints on a terminal: a run over a
// big backlog names the first rows and points at the receipt for the rest.
const maxTableRows = 50

// isTerminal reports whether w is a terminal a person reads (not a
// dumb one).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && os.Getenv("TERM") != "dumb" && term.IsTerminal(int(f.Fd()))
}

// printRunTable prints, after the summary, why handoffs were deferred, a
// table of what this run decided (host when there are several, name,
// result, reason, the path it wrote in the workspace) bounded to
// maxTableRows, a line per inbox whose handoffs git tracks, a line per
// mirrored host, and the receipt's path.
// Every line of a dry run starts with "[dry-run] ".
func printRunTable(w io.Writer, m *manifest.Manifest, ws string, r *receipts.Receipt) {
	prefix := ""
	if r.Mode == receipts.ModeDryRun {
		prefix = "[dry-run] "
	}
	if why := deferredWhy(m, r); why != "" {
		fmt.Fprintf(w, "%sDeferred %d: %s\n", prefix, r.Counts.Deferred, why)
	}
	if len(r.Handoffs) > 0 {
		hosts := map[string]bool{}
		for _, h := range r.Handoffs {
			hosts[h.Host] = true
		}
		withHost := len(hosts) > 1
		fmt.Fprintln(w, strings.TrimRight(prefix, " "))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		if withHost {
			fmt.Fprintf(tw, "%sHOST\tNAME\tRESULT\tREASON\tWORKSPACE PATH\n", prefix)
		} else {
			fmt.Fprintf(tw, "%sNAME\tRESULT\tREASON\tWORKSPACE PATH\n", prefix)
		}
		for i, h := range r.Handoffs {
			if i == maxTableRows {
				break
			}
			// One kind of path: what the run wrote in the workspace (card,
			// document, review draft); where a host's copy was archived is
			// in the receipt.
			row := []string{claim.Printable(h.Name), h.Result, dash(h.Reason), dash(claim.Printable(h.Target))}
			if withHost {
				row = append([]string{claim.Printable(h.Host)}, row...)
			}
			fmt.Fprintf(tw, "%s%s\n", prefix, strings.Join(row, "\t"))
		}
		tw.Flush()
		if n := len(r.Handoffs) - maxTableRows; n > 0 {
			fmt.Fprintf(w, "%s… and %d more, see the receipt\n", prefix, n)
		}
	}
	for _, h := range r.Hosts {
		for _, in := range h.Inboxes {
			if in.Tracked > 0 {
				fmt.Fprintf(w, "%sInbox %s:%s: tracked %d (committed to git, so never collected; `handoff doctor` says how to fix it)\n",
					prefix, claim.Printable(h.Name), claim.Printable(in.Path), in.Tracked)
			}
		}
	}
	for _, h := range r.Hosts {
		if h.Mirror != nil {
			fmt.Fprintf(w, "%sMirror %s: %s\n", prefix, claim.Printable(h.Name), mirrorLine(h.Mirror, r.Mode == receipts.ModeDryRun))
		}
	}
	if r.Mode == receipts.ModeDryRun {
		fmt.Fprintf(w, "%sReceipt: none (a dry run writes nothing)\n", prefix)
		return
	}
	fmt.Fprintf(w, "Receipt: %s\n", filepath.Join(ws, filepath.FromSlash(layout.ReceiptsDir), r.RunID+".json"))
}

// mirrorLine says what a host's mirror did: the files it sent and
// removed (MIRROR.json among them when it was rewritten) and its
// generation, or why it was not published; in a dry run, what it would
// do.
func mirrorLine(m *receipts.Mirror, dryRun bool) string {
	switch m.Outcome {
	case mirror.OutcomeOK:
	case mirror.OutcomeSkipped:
		return "skipped: " + printable(firstLine(m.Error))
	default:
		return "error: " + printable(firstLine(m.Error))
	}
	if len(m.Sent) == 0 && len(m.Removed) == 0 {
		return fmt.Sprintf("up to date; generation %d", m.Generation)
	}
	send, remove := "sent", "removed"
	if dryRun {
		send, remove = "would send", "remove"
	}
	return fmt.Sprintf("%s %d file(s) (%s), %s %d; generation %d", send, len(m.Sent), formatBytes(m.Bytes), remove, len(m.Removed), m.Generation)
}

// deferredWhy counts the deferred handoffs by reason, as a person reads
// them: "2 too young for settle 10s, 1 changed while read". Too-young ones
// are grouped by their host's settle.
func deferredWhy(m *manifest.Manifest, r *receipts.Receipt) string {
	type key struct{ reason, settle string }
	var order []key
	n := map[key]int{}
	for _, h := range r.Handoffs {
		if h.Result != receipts.ResultDeferred {
			continue
		}
		k := key{reason: h.Reason}
		if h.Reason == claim.ReasonTooYoung {
			if hc, ok := m.Host(h.Host); ok {
				k.settle = shortDuration(hc.Settle)
			}
		}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	var parts []string
	for _, k := range order {
		var what string
		switch k.reason {
		case claim.ReasonTooYoung:
			what = "too young"
			if k.settle != "" {
				what += " for settle " + k.settle
			}
		case claim.ReasonChanging:
			what = "changed while read"
		case claim.ReasonReadFailed:
			what = "could not be read (see the receipt's error)"
		default:
			what = dash(k.reason)
		}
		parts = append(parts, fmt.Sprintf("%d %s", n[k], what))
	}
	return strings.Join(parts, ", ")
}

// shortDuration prints a duration as a manifest says it: 10s, 5m, 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
