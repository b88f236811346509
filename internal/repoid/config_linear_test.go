package repoid

import (
	"runtime"
	"strings"
	"testing"
)

// TestOriginURLContinuedLinear: an origin url continued over 32,000
// lines (a 64 KiB config, the most the pull reads). Invariant: the
// continuation lines are joined in linear work: the url is read whole,
// allocating a small multiple of the config's size, where joining by
// concatenation allocated about a gigabyte (~140 ms of canonical CPU per
// repository).
func TestOriginURLContinuedLinear(t *testing.T) {
	const n = 32_000
	text := "[remote \"origin\"]\n\turl = https://example.com/a" + strings.Repeat("\\\nb", n) + "\n"
	want := "https://example.com/a" + strings.Repeat("b", n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, ok := originURL(text)
	runtime.ReadMemStats(&after)
	if !ok || got != want {
		t.Fatalf("originURL: %v, %d bytes; want the %d-byte url", ok, len(got), len(want))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32*uint64(len(text)) {
		t.Errorf("joining %d continuation lines allocated %d bytes; want at most %d (linear)", n, alloc, 32*len(text))
	}
}
