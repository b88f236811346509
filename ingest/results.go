package ingest

// Results a handoff can get, as the receipt spells them.
const (
	ResultPromoted  = "promoted"  // a card was created or updated
	ResultRouted    = "routed"    // text was appended to a document
	ResultReview    = "review"    // a draft waits in .handoff/review
	ResultMalformed = "malformed" // it did not parse; quarantined
	ResultDuplicate = "duplicate" // the same bytes were ingested before, or (card-identical) the card already holds them
	ResultRejected  = "rejected"  // never read: symlink, not regular, oversize
	ResultDeferred  = "deferred"  // left for a later run: too young, changing
)

// Parses reports whether data is a well-formed handoff; the pull uses it to
// archive into processed/ or malformed/.
func Parses(data []byte) bool {
	_, err := Parse(data)
	return err == nil
}
