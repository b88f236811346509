package receipts

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// The outcome says whether every handoff that could be taken was: a
// failed host is never reported ok, an ingest error never partial.
func TestBuilderJudge(t *testing.T) {
	ok, bad := Host{Name: "a", Outcome: HostOK}, Host{Name: "b", Outcome: HostError}
	part := Host{Name: "d", Outcome: HostPartial}
	tests := []struct {
		name            string
		hosts           []Host
		results         []string
		runErr          error
		outcome, status string
	}{
		{"all hosts ok, nothing", []Host{ok, ok}, nil, nil, OutcomeOK, StatusEmpty},
		{"only deferred", []Host{ok}, []string{ResultDeferred}, nil, OutcomeOK, StatusEmpty},
		{"one host failed", []Host{ok, bad}, []string{ResultPromoted}, nil, OutcomePartial, StatusIngested},
		{"every host failed", []Host{bad, bad}, nil, nil, OutcomeFailed, StatusEmpty},
		{"ingest failed", []Host{ok}, []string{ResultReview}, errors.New("disk full"), OutcomeFailed, StatusIngested},
		{"no hosts", nil, nil, nil, OutcomeOK, StatusEmpty},
		// SPEC: an inbox whose listing failed makes the run partial; its
		// handoffs were not taken, though the host answered.
		{"an inbox not listed", []Host{ok, {Name: "c", Outcome: HostOK, Inboxes: []Inbox{{State: "ok"}, {State: InboxError}}}}, nil, nil, OutcomePartial, StatusEmpty},
		// A host that could not archive in one inbox is partial, never
		// failed: its handoffs were taken and applied. Every host
		// partial is still a partial run.
		{"every host partial", []Host{part, part}, []string{ResultPromoted}, nil, OutcomePartial, StatusIngested},
		{"a partial host", []Host{ok, part}, nil, nil, OutcomePartial, StatusEmpty},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder("id", ModeApply, time.Unix(0, 0), Manifest{}, "/ws", "")
			for _, h := range tc.hosts {
				b.AddHost(h, 1)
			}
			for _, res := range tc.results {
				b.AddHandoffs(Handoff{Result: res})
			}
			b.Judge(tc.runErr)
			r := b.Finish(time.Unix(1, 0))
			if r.Outcome != tc.outcome || r.Status != tc.status {
				t.Errorf("outcome %q status %q, want %q %q", r.Outcome, r.Status, tc.outcome, tc.status)
			}
			if r.Counts.Pulled != len(tc.hosts) {
				t.Errorf("pulled %d, want %d", r.Counts.Pulled, len(tc.hosts))
			}
			if (tc.runErr != nil) != (r.Error != "") {
				t.Errorf("error %q for run error %v", r.Error, tc.runErr)
			}
		})
	}
}

// Only the first failed ping is kept: it is the one that says why.
func TestBuilderNotifyFailed(t *testing.T) {
	b := NewBuilder("id", ModeApply, time.Now(), Manifest{}, "/ws", "")
	if b.NotifyFailed(nil) || !b.Receipt().Notify.OK {
		t.Fatal("a nil error was recorded")
	}
	if !b.NotifyFailed(errors.New("first")) || b.NotifyFailed(errors.New("second")) {
		t.Fatal("want the first failure recorded, the second not")
	}
	if n := b.Receipt().Notify; n.OK || n.Error != "first" {
		t.Errorf("notify %+v", n)
	}
}

// An interrupted run is failed and says it was stopped, in place of the
// ingest's bare "context canceled", keeping what it counted.
func TestBuilderInterrupted(t *testing.T) {
	b := NewBuilder("run", ModeApply, time.Now(), Manifest{}, "/ws", "")
	b.AddHost(Host{Name: "laptop", Outcome: HostError, Stored: 72, Archived: 70}, 72)
	b.AddHandoffs(Handoff{Result: ResultRouted})
	b.Judge(fmt.Errorf("ingest: %w", context.Canceled))
	b.Interrupted(errors.New("interrupt signal received"))
	r := b.Finish(time.Now())
	if !r.Interrupted || r.Outcome != OutcomeFailed || r.Error != "interrupted: interrupt signal received" {
		t.Errorf("interrupted %v, outcome %q, error %q", r.Interrupted, r.Outcome, r.Error)
	}
	if r.Counts.Pulled != 72 || r.Counts.Routed != 1 {
		t.Errorf("counts %+v, want pulled 72, routed 1", r.Counts)
	}
}
