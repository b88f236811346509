package ingest

import (
	gohash "hash"

	"github.com/handoff-sync/handoff/internal/openclaw"

	"github.com/handoff-sync/handoff/ingest/ledger"
)

// The ledger's records, by the names the ingester's code uses.
type (
	sourceRow = ledger.SourceRow
	outcome   = ledger.Outcome
	finished  = ledger.Finished
)

// plan is a change the ingester has decided to make to one target: what
// the ledger keeps of it, and what the planner read and computed.
type plan struct {
	ledger.Plan
	cur  []byte        // the target's content the plan was made on (nil when absent)
	next []byte        // the target's content once the plan is applied
	tail gohash.Cloner // of next, for a document (viewed.tail)
	// overflow is the bootstrap file the plan would leave cut
	// (ReasonBootstrapCap), for the person's view.
	overflow openclaw.Loaded
}

// ledgerPlans are the ledger's views of plans, which share their ids.
func ledgerPlans(ps []*plan) []*ledger.Plan {
	out := make([]*ledger.Plan, len(ps))
	for i, p := range ps {
		out[i] = &p.Plan
	}
	return out
}
