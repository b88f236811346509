package receipts

// ModeImport is the receipt of `handoff import processed`, and
// ResultLegacy the result of each file it recorded: found archived in
// processed/ and recorded as ingested before, never applied.
const (
	ModeImport   = "import"
	ResultLegacy = "legacy"
)
