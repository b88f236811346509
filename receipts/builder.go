package receipts

import (
	"context"
	"strings"
	"time"
)

// Results a handoff entry may carry (handoffs[].result) and a host's
// outcomes (hosts[].outcome).
const (
	ResultPromoted  = "promoted"
	ResultRouted    = "routed"
	ResultReview    = "review"
	ResultMalformed = "malformed"
	ResultDuplicate = "duplicate"
	ResultRejected  = "rejected"
	ResultDeferred  = "deferred"

	HostOK    = "ok"
	HostError = "error"
	// HostPartial: the host was pulled, but some of its inboxes are in
	// state error (files stored but not archived); its mirror is
	// published all the same.
	HostPartial = "partial"

	// InboxOK is the state of an inbox that was listed.
	InboxOK = "ok"
	// InboxError is the state of an inbox that could not be listed, or
	// whose stored files could not all be archived.
	InboxError = "error"
)

// Builder assembles one run's receipt as the run goes: the hosts once
// their pulls end, the handoffs as they get results, the heartbeat's
// failures, and at the end the counts, the outcome and the status. Its
// methods are not safe for concurrent use.
type Builder struct {
	r *Receipt
}

// NewBuilder starts the receipt of run id in mode (ModeApply, ModeDryRun).
func NewBuilder(id, mode string, started time.Time, m Manifest, workspace, workspaceID string) *Builder {
	return &Builder{r: &Receipt{
		SchemaVersion: SchemaVersion,
		RunID:         id,
		Mode:          mode,
		StartedAt:     started.UTC(),
		Manifest:      m,
		Workspace:     workspace,
		WorkspaceID:   workspaceID,
		Hosts:         []Host{},
		Handoffs:      []Handoff{},
		Notify:        Notify{OK: true},
	}}
}

// Receipt is the receipt as built so far.
func (b *Builder) Receipt() *Receipt { return b.r }

// AddHost records one host's pull, which stored pulled new sources.
func (b *Builder) AddHost(h Host, pulled int) {
	b.r.Hosts = append(b.r.Hosts, h)
	b.r.Counts.Pulled += pulled
}

// SetOpenClaw records what the run found of OpenClaw and did for it.
func (b *Builder) SetOpenClaw(o *OpenClaw) { b.r.OpenClaw = o }

// AddHandoffs records handoff entries.
func (b *Builder) AddHandoffs(hs ...Handoff) {
	b.r.Handoffs = append(b.r.Handoffs, hs...)
}

// NotifyFailed records that a heartbeat ping failed; only the first
// failure is kept. It reports whether err was recorded.
func (b *Builder) NotifyFailed(err error) bool {
	if err == nil || !b.r.Notify.OK {
		return false
	}
	b.r.Notify = Notify{OK: false, Error: err.Error()}
	return true
}

// Judge tallies the counts and sets the outcome and status: failed when
// the ingest failed (runErr) or every host did, partial when some host
// failed or was partial, some inbox could not be listed or archived in, or
// a mirror failed, else ok; ingested when any handoff got a result other
// than deferred. It may be called again after more is added.
func (b *Builder) Judge(runErr error) {
	r := b.r
	r.Tally()
	failed, unlisted := 0, 0
	for _, h := range r.Hosts {
		switch h.Outcome {
		case HostError:
			failed++
		case HostPartial:
			unlisted++
		}
		for _, in := range h.Inboxes {
			if in.State == InboxError {
				unlisted++
			}
		}
		if h.Mirror != nil && h.Mirror.Outcome == HostError {
			unlisted++ // a mirror that failed makes the run partial, never failed
		}
	}
	switch {
	case runErr != nil || (failed > 0 && failed == len(r.Hosts)):
		r.Outcome = OutcomeFailed
	case failed > 0 || unlisted > 0:
		r.Outcome = OutcomePartial
	default:
		r.Outcome = OutcomeOK
	}
	r.Status = StatusEmpty
	for _, h := range r.Handoffs {
		if h.Result != ResultDeferred {
			r.Status = StatusIngested
			break
		}
	}
	r.Error = ""
	if runErr != nil {
		r.Error = runErr.Error()
	}
}

// Interrupted marks the run as stopped before it was done (cause: the
// signal): its outcome is failed, and its error says it was stopped in
// place of the ingest's "context canceled". Call it after Judge.
func (b *Builder) Interrupted(cause error) {
	r := b.r
	r.Interrupted = true
	r.Outcome = OutcomeFailed
	msg := "interrupted"
	if cause != nil {
		msg += ": " + cause.Error()
	}
	if r.Error != "" && !strings.HasSuffix(r.Error, context.Canceled.Error()) {
		msg += "; " + r.Error
	}
	r.Error = msg
}

// SetMirror records what publishing host's mirror did.
func (b *Builder) SetMirror(host string, m Mirror) {
	for i := range b.r.Hosts {
		if b.r.Hosts[i].Name == host {
			b.r.Hosts[i].Mirror = &m
		}
	}
}

// Finish stamps the end of the run and returns the receipt.
func (b *Builder) Finish(finished time.Time) *Receipt {
	b.r.FinishedAt = finished.UTC()
	return b.r
}
