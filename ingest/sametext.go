package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
)

// The same handoff across line endings. A sync tool's conflict copy, a
// Windows editor or a formatter saves a handoff again with CRLF line ends
// or trailing whitespace: other bytes, the same handoff. Two handoffs
// whose normal texts are equal are one handoff for applying: the later is
// a duplicate (reason same-text), never applied a second time. The exact
// bytes of each are stored as always. docs/handoff-format.md, "The same
// handoff".

// NormalText returns data's normal text: every line end LF (a CR before
// an LF or at the end dropped), every line's trailing spaces and tabs
// dropped, blank lines at the start and the end dropped, and one LF at
// the end (none for a text that is all blank). normal reports that data
// is its own normal text; then out is data itself.
func NormalText(data []byte) (out []byte, normal bool) {
	if isNormal(data) {
		return data, true
	}
	lines := bytes.Split(data, []byte("\n"))
	kept := make([][]byte, 0, len(lines))
	for _, l := range lines {
		kept = append(kept, bytes.TrimRight(l, " \t\r"))
	}
	for len(kept) > 0 && len(kept[0]) == 0 {
		kept = kept[1:]
	}
	for len(kept) > 0 && len(kept[len(kept)-1]) == 0 {
		kept = kept[:len(kept)-1]
	}
	if len(kept) == 0 {
		return []byte{}, len(data) == 0
	}
	out = append(bytes.Join(kept, []byte("\n")), '\n')
	if bytes.Equal(out, data) {
		return data, true // a lone CR, say, which is no line end
	}
	return out, false
}

// isNormal reports whether data is its own normal text, in one pass and
// without copying: what nearly every handoff is.
func isNormal(data []byte) bool {
	n := len(data)
	if n == 0 {
		return true
	}
	if data[n-1] != '\n' || data[0] == '\n' || n >= 2 && data[n-2] == '\n' {
		return false
	}
	for i, c := range data {
		switch c {
		case '\r':
			return false
		case '\n':
			if i > 0 && (data[i-1] == ' ' || data[i-1] == '\t') {
				return false
			}
		}
	}
	return !startsBlank(data)
}

// startsBlank reports whether data's first line holds only spaces and
// tabs.
func startsBlank(data []byte) bool {
	for _, c := range data {
		switch c {
		case ' ', '\t':
		case '\n':
			return true
		default:
			return false
		}
	}
	return true
}

// normalHash is the SHA-256 of data's normal text, and "" when data is in
// normal form (its normal text's hash is then its own).
func normalHash(data []byte) string {
	out, normal := NormalText(data)
	if normal {
		return ""
	}
	s := sha256.Sum256(out)
	return hex.EncodeToString(s[:])
}

// normOf is normalHash of a stored source's bytes, for the one-at-a-time
// paths (a plan finished alone, recovery, review): "" when they cannot
// be read, which only leaves a later copy in normal form undetected.
func (in *Ingester) normOf(src sourceRow) string {
	if in.spool == nil {
		return ""
	}
	data, err := in.spool.Get(src.SHA256)
	if err != nil {
		return ""
	}
	return normalHash(data)
}
