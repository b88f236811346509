package receipts

import (
	"time"
)

// ModeReview is the mode of the receipt a `handoff review accept`, `edit`
// or `reject` writes: one per command that decided something (or finished
// what a crashed run left), with the same schema as a sync's.
const ModeReview = "review"

// Decisions a person makes in `handoff review`, as receipts spell them.
const (
	DecisionAccepted = "accepted"
	DecisionEdited   = "edited"
	DecisionRejected = "rejected"
	// DecisionSuperseded: another version of the same handoff (a rewrite
	// at the same inbox path) was accepted or edited; this one waits no
	// more, and its bytes stay as a rejected one's do.
	DecisionSuperseded = "superseded"
)

// Decision is a person's decision about a handoff that waited for review,
// on the handoff entry it concerns.
type Decision struct {
	// Decision is accepted, edited, rejected or superseded.
	Decision string `json:"decision"`
	// By is who decided, as $USER@host; At when.
	By   string    `json:"by"`
	At   time.Time `json:"at"`
	Note string    `json:"note"`
	// WaitedAs is the result the handoff waited with (review or malformed)
	// and Reason its reason code.
	WaitedAs string `json:"waited_as"`
	Reason   string `json:"reason"`
	// Overrides are the rules the person's word relaxed: workspace (the
	// card's state: hash-conflict, card-exists, card-missing),
	// allow-secret, allow-hidden, allow-injection.
	Overrides []string `json:"overrides"`
	// Draft is the review draft the decision took out of the review
	// inbox; empty for a malformed handoff, which has none.
	Draft string `json:"draft"`
	// EditedSHA256 is, on an edited handoff's entry, the SHA-256 of the
	// handoff the edit made; OriginalSHA256, on the entry of the handoff
	// an edit made, the one it was edited from.
	EditedSHA256   string `json:"edited_sha256,omitempty"`
	OriginalSHA256 string `json:"original_sha256,omitempty"`
}
