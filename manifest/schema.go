package manifest

import (
	"bytes"
	_ "embed"
)

// SchemaID is the $id of the manifest's JSON Schema.
const SchemaID = "https://raw.githubusercontent.com/handoff-sync/handoff/main/manifest/schema.json"

// schemaJSON is schema.json, written by hand. Tests keep it in step with
// the Go types: every json field of [Manifest] and the types below it is a
// property, no property lacks a field, every object forbids other
// properties, and the defaults and limits match this package's.
//
//go:embed schema.json
var schemaJSON []byte

// Schema returns a JSON Schema (draft 2020-12) for the writers manifest,
// for editors: it describes every field, its type and default, and
// rejects unknown fields, as [Parse] does. A manifest that [Parse]
// accepts is valid against it, with two notable exceptions: the schema
// wants quotes around a string value that YAML reads as a number or
// boolean (such as user: "1000"), and it flags a key with an empty (null)
// value. Some rules are beyond a schema:
// unique host names, paths after cleaning, and the ranges of sizes and
// durations written as strings; `handoff manifest check` checks them.
//
// The result is a new copy, indented, ending in a newline.
func Schema() []byte {
	return bytes.Clone(schemaJSON)
}
