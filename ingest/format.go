package ingest

import (
	"maps"
	"slices"
)

// Types returns the handoff types a handoff's Type section may name,
// sorted.
func Types() []string { return slices.Sorted(maps.Keys(handoffTypes)) }

// Documents returns the documents a no-card handoff may add to, by name;
// rules/NAME.md stands for the rules directory's files.
func Documents() []string {
	return append(slices.Sorted(maps.Keys(fixedDocuments)), "rules/NAME.md")
}

// IsCardName reports whether name is a card file name the ingester
// accepts as a target card.
func IsCardName(name string) bool { return isCardName(name) }
