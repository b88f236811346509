package continuity

import (
	"context"
	"slices"

	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/manifest"
)

// PrivateTargets returns, for each host of the manifest, the cards and
// documents (workspace paths) that a private handoff of another host
// wrote: its mirror must not hold them. A handoff is private when its
// inbox is under a private discover root of its host or its repository's
// repos entry is private (as for repos/). A host the manifest no longer
// names has no privacy to keep: its writes are not withheld.
func PrivateTargets(ctx context.Context, led *ledger.Ledger, m *manifest.Manifest) (map[string][]string, error) {
	writes, err := led.Writes(ctx)
	if err != nil {
		return nil, err
	}
	inboxes, err := led.InboxRepos(ctx)
	if err != nil {
		return nil, err
	}
	known := map[[2]string]ledger.InboxRepo{}
	for _, r := range inboxes {
		known[[2]string{r.Host, r.Inbox}] = r
	}
	cfg := map[string]manifest.HostConfig{}
	for _, h := range m.HostConfigs() {
		cfg[h.Name] = h
	}
	private := map[string]map[string]bool{} // writer host -> targets
	for _, w := range writes {
		h, ok := cfg[w.Host]
		if !ok {
			continue
		}
		r := known[[2]string{w.Host, w.Inbox}]
		priv := h.PrivateAt(w.Inbox, r.Home)
		if !priv && r.Repo != "" {
			if e := m.RepoFor(w.Host, r.Repo, r.Home, r.Origin); e >= 0 && m.Repos[e].Private {
				priv = true
			}
		}
		if priv {
			if private[w.Host] == nil {
				private[w.Host] = map[string]bool{}
			}
			private[w.Host][w.Target] = true
		}
	}
	out := map[string][]string{}
	for name := range cfg {
		set := map[string]bool{}
		for writer, targets := range private {
			if writer == name {
				continue
			}
			for t := range targets {
				set[t] = true
			}
		}
		for t := range set {
			out[name] = append(out[name], t)
		}
		slices.Sort(out[name])
	}
	return out, nil
}
