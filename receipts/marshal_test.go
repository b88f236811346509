package receipts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// bigReceipt is a bulk run's receipt: n handoffs with every field set.
func bigReceipt(n int) *Receipt {
	r := &Receipt{SchemaVersion: SchemaVersion, RunID: "20261129T203600Z-3f9a1c", Mode: ModeApply, Outcome: OutcomeOK, Status: StatusEmpty}
	sum := "3f9a1c2b3f9a1c2b3f9a1c2b3f9a1c2b3f9a1c2b3f9a1c2b3f9a1c2b3f9a1c2b"
	for i := range n {
		r.Handoffs = append(r.Handoffs, Handoff{Host: "h1", Inbox: "/home/me/code/app/.codex/memory-handoffs", Name: fmt.Sprintf("2026-04-20-1537-%d.md", i),
			SHA256: sum, Size: 2400, Result: "promoted", Action: "create-card", Target: "memory/cards/x.md", AfterSHA256: sum,
			ArchivedAs: "processed/2026-04-20-1537--3f9a1c2b.md"})
	}
	return r
}

// TestMarshalIsMarshalIndent: Marshal writes the bytes encoding/json's
// MarshalIndent writes, for receipts whose strings hold every character
// the indenter treats specially, empty and null lists, and nested
// objects; people's jq scripts and diffs see no change.
func TestMarshalIsMarshalIndent(t *testing.T) {
	odd := bigReceipt(3)
	odd.Handoffs[0].Name = `a "quoted", {braced} [listed] name: \ back\slash\\`
	odd.Handoffs[1].Error = "tab\there, newline\n, <html> & \u2028 é \x01"
	odd.Handoffs[2].Decision = &Decision{}
	odd.Handoffs[2].Reason = `ends in a backslash \`
	empty := &Receipt{SchemaVersion: SchemaVersion, RunID: "r", Handoffs: []Handoff{}}
	for name, r := range map[string]*Receipt{"bulk": bigReceipt(50), "odd": odd, "empty lists": empty, "zero": {}} {
		want, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got, err := Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(want, '\n')) {
			t.Errorf("%s: Marshal differs from MarshalIndent:\n%s\nwant:\n%s", name, got, want)
		}
	}
}

// FuzzIndent: for any JSON document, indent of its compact form is what
// json.Indent makes of it.
func FuzzIndent(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,{"b":null}],"c":"x\"y\\"}`, `[[],{},""]`, `"{[,:]}"`, `{"k":"\u00e9\n"}`, `-1.5e3`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var compact bytes.Buffer
		if json.Compact(&compact, []byte(s)) != nil {
			return
		}
		var want bytes.Buffer
		if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got := indent(nil, compact.Bytes()); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("indent(%q):\n%s\nwant:\n%s", compact.Bytes(), got, want.Bytes())
		}
	})
}

// BenchmarkMarshal/stdlib is json.MarshalIndent, which Marshal replaced;
// /receipts is Marshal. A bulk run's receipt: 8,000 handoffs.
func BenchmarkMarshal(b *testing.B) {
	r := bigReceipt(8000)
	b.Run("stdlib", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.MarshalIndent(r, "", "  "); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("receipts", func(b *testing.B) {
		for b.Loop() {
			if _, err := Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
