package handoff

import (
	"log/slog"
	"sync"

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

// forEachHost runs fn for every host, at most parallel at once, and waits.
// fn gets the host's index, so results can land in manifest order.
func forEachHost(hosts []manifest.HostConfig, parallel int, fn func(i int, h manifest.HostConfig)) {
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fn(i, h)
		})
	}
	wg.Wait()
}
