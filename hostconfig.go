package handoff

import (
	"log/slog"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/manifest"
)

// claimConfig is what claim needs to know about a manifest host: sync,
// doctor and prune all discover the same inboxes the same way.
func claimConfig(h manifest.HostConfig, log *slog.Logger) claim.Config {
	cfg := claim.Config{
		Host: h.Name, Transport: h.Transport, Harnesses: h.Harnesses, Inboxes: h.Inboxes,
		MaxFileSize: h.MaxFileSize, Settle: h.Settle, Log: log,
	}
	for _, d := range h.Discover {
		cfg.Roots = append(cfg.Roots, claim.Root{Path: d.Root, MaxDepth: d.MaxDepth})
	}
	return cfg
}
