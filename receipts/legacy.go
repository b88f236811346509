package receipts

import (
	"fmt"
	"os"

	"github.com/handoff-sync/handoff/internal/durable"
)

// ModeImport is the receipt of `handoff import processed`, and
// ResultLegacy the result of each file it recorded: found archived in
// processed/ and recorded as ingested before, never applied.
const (
	ModeImport   = "import"
	ResultLegacy = "legacy"
)

// WriteRun stores <run-id>.json in dir (created if needed), durably and
// atomically, and leaves latest.json and latest.log alone: they describe
// the newest sync, which doctor and the heartbeat judge the timer by. The
// receipts of `handoff import processed` and `handoff review` are written
// so. It returns the file's path.
func WriteRun(dir string, r *Receipt) (string, error) {
	data, err := Marshal(r)
	if err != nil {
		return "", err
	}
	if err := durable.MkdirAllPath(dir, 0o700); err != nil {
		return "", fmt.Errorf("receipts: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("receipts: %w", err)
	}
	defer root.Close()
	name := r.RunID + ".json"
	if err := durable.WriteFile(root, name, data, 0o600); err != nil {
		return "", fmt.Errorf("receipts: %w", err)
	}
	return root.Name() + "/" + name, nil
}
