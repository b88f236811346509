package ledger

import "context"

// KnownHandoffs is Ledger.KnownHandoffs on a read-only view: which of
// these content hashes have a result in that ledger.
func (v *View) KnownHandoffs(ctx context.Context, shas []string) (map[string]bool, error) {
	return v.l.KnownHandoffs(ctx, shas)
}
