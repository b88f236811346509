package ingest

// Reason codes say why a handoff was not applied as written. They appear in
// receipts, in the ledger and in `handoff lint` output, so they are stable:
// never rename one, only add new ones.
const (
	// Malformed: the file cannot be parsed as a handoff at all.
	ReasonParseError = "parse-error"

	// Review: parsed, but not safe to apply automatically.
	ReasonMissingSection      = "missing-section"
	ReasonMissingFrontMatter  = "missing-front-matter"
	ReasonInvalidFrontMatter  = "invalid-front-matter"
	ReasonUnsafeCardName      = "unsafe-card-name"
	ReasonCardExists          = "card-exists"
	ReasonCardMissing         = "card-missing"
	ReasonMissingExpectedSHA  = "missing-expected-sha256"
	ReasonHashConflict        = "hash-conflict"
	ReasonBothCardAndDocument = "both-card-and-document"
	ReasonUnsafeTarget        = "unsafe-target"
	ReasonHeadingInDocument   = "heading-in-document"
	ReasonUnknownAction       = "unknown-action"
	ReasonInvalidType         = "invalid-type"
	ReasonSecretLike          = "secret-like-content"
	ReasonHiddenCharacters    = "hidden-characters"
	ReasonInjectionLike       = "injection-like-content"
	ReasonNoTarget            = "no-target"
	ReasonUnfilledTemplate    = "unfilled-template"
	// ReasonDatedCardName: a card name OpenClaw reads as a dated daily
	// note (YYYY-MM-DD…), which its memory search decays and its nightly
	// sweep promotes into MEMORY.md.
	ReasonDatedCardName = "dated-card-name"
	// ReasonBootstrapCap: the append would take a file OpenClaw loads at
	// a session's start past what OpenClaw loads of it, so part of the
	// file would be cut from every session.
	ReasonBootstrapCap = "bootstrap-cap"
	// ReasonPrivateAppend: a private handoff (its repository or discover
	// root private to its host) appends to a document the other hosts'
	// mirrors show; applied, it would keep the whole document off them.
	ReasonPrivateAppend = "private-append"
	// ReasonPrivateCard: a private handoff changes a card the other
	// hosts' mirrors show; applied, it would take the card off them.
	ReasonPrivateCard = "private-card"
	// ReasonRevised: a handoff with the host, inbox and file name of an
	// earlier one and other bytes, which the ingester will not apply a
	// second time blindly (see revision.go). On a promoted card it says
	// the revision was applied as an update over its earlier version.
	ReasonRevised = "revised"

	// Duplicate: nothing to write and nothing for a person to decide.
	ReasonCardIdentical = "card-identical"
	// ReasonSameText: other bytes, the same normal text as a handoff
	// stored before (CRLF line ends, trailing whitespace; sametext.go).
	ReasonSameText = "same-text"

	// Rejected or deferred at claim time: the file was never read, or not yet.
	ReasonSymlink    = "symlink"
	ReasonNotRegular = "not-regular"
	ReasonOversize   = "oversize"
	ReasonChanging   = "changing"
	ReasonTooYoung   = "too-young"
)

// Reasons maps every reason code to a one-line description for people; the
// documentation of receipts is generated from it.
var Reasons = map[string]string{
	ReasonDatedCardName:       "the card name starts with a date (YYYY-MM-DD), which OpenClaw reads as a daily note: it decays in memory search and its nightly sweep promotes it into MEMORY.md",
	ReasonBootstrapCap:        "the append would take a file OpenClaw loads at a session's start past what OpenClaw loads of it (USER.md 4,000 characters, others 20,000, 60,000 in all), and the cut part would reach no session",
	ReasonPrivateCard:         "a handoff private to its host (its repository or discover root is private) changes a card the other hosts' mirrors show: applied, its content would keep the card off them; accepting it does that, rejecting it keeps the card shared",
	ReasonPrivateAppend:       "a handoff private to its host (its repository or discover root is private) appends to a document the other hosts' mirrors show: applied, its text would keep the whole document off them; accepting it does that, rejecting it keeps the document shared",
	ReasonParseError:          "the file is not a handoff: invalid UTF-8, a NUL byte, no \"# Memory Handoff\" first line, no known section, or a section given twice",
	ReasonMissingSection:      "a required section is absent, empty or only a placeholder such as \"(none)\"",
	ReasonMissingFrontMatter:  "the suggested card content does not start with a \"---\" front matter block",
	ReasonInvalidFrontMatter:  "the card front matter is unclosed, is not a YAML mapping, or lacks topic, category or a tags list (other keys, such as title, do not stand in for them)",
	ReasonUnsafeCardName:      "the target card is not a plain file name like \"my-card.md\"",
	ReasonCardExists:          "create-card names a card that already exists, with content other than the handoff's",
	ReasonCardMissing:         "update-card names a card that does not exist",
	ReasonMissingExpectedSHA:  "update-card lacks an expected card sha256 of 64 hex digits",
	ReasonHashConflict:        "the card no longer has the sha256 the writer expected: someone changed it since",
	ReasonBothCardAndDocument: "the handoff carries both card fields and document fields",
	ReasonUnsafeTarget:        "the target document is not one of the allowed documents",
	ReasonHeadingInDocument:   "the document content contains a \"#\" or \"##\" heading line",
	ReasonUnknownAction:       "the recommended memory action is not create-card, update-card or no-card, or does not fit the fields given",
	ReasonInvalidType:         "the type is not one of the known handoff types",
	ReasonSecretLike:          "the handoff contains what looks like a private key or access token",
	ReasonHiddenCharacters:    "the handoff contains invisible, bidirectional or control characters",
	ReasonInjectionLike:       "the card or document text addresses the agent that will read it with instructions to disregard its earlier instructions, hide something from the user, send out secrets or switch off its safety rules",
	ReasonNoTarget:            "a no-card handoff names no document to update, so a person must decide",
	ReasonUnfilledTemplate:    "a section still holds a `handoff template` placeholder, <FILL: …>",
	ReasonRevised:             "its writer rewrote an earlier handoff in place (the same host, inbox and file name, other bytes); it is not applied a second time blindly: a person decides between the versions",
	ReasonCardIdentical:       "create-card names a card that already holds exactly this content, byte for byte; nothing is written",
	ReasonSameText:            "the handoff differs from one stored before only in line endings (CRLF), trailing whitespace or blank lines around it: the same handoff, not applied again",
	ReasonSymlink:             "the handoff, its inbox or a target path is a symbolic link",
	ReasonNotRegular:          "the handoff is not a regular file",
	ReasonOversize:            "the handoff is larger than max_file_size",
	ReasonChanging:            "the handoff changed while it was being read; it is retried on the next run",
	ReasonTooYoung:            "the handoff is younger than settle; it is retried on the next run",
}
