package handoff

import (
	"os"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/ingest"
)

// TestReceiptDocsListEveryReason keeps docs/receipts.md in step with the
// reason codes the code can produce.
func TestReceiptDocsListEveryReason(t *testing.T) {
	b, err := os.ReadFile("docs/receipts.md")
	if err != nil {
		t.Fatal(err)
	}
	for code := range ingest.Reasons {
		if !strings.Contains(string(b), "| `"+code+"` |") {
			t.Errorf("docs/receipts.md does not document reason %q", code)
		}
	}
}
