package continuity

import (
	"context"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/manifest"
)

// privacy says whether a handoff of an inbox is private to its host: its
// inbox is under a private discover root of its host, or its
// repository's repos entry is private (as for repos/).
type privacy struct {
	m     *manifest.Manifest
	cfg   map[string]manifest.HostConfig
	known map[[2]string]ledger.InboxRepo
	home  map[string]string // each host's newest recorded home
}

func newPrivacy(ctx context.Context, led *ledger.Ledger, m *manifest.Manifest) (*privacy, error) {
	inboxes, err := led.InboxRepos(ctx)
	if err != nil {
		return nil, err
	}
	p := &privacy{m: m, cfg: hostConfigs(m), known: map[[2]string]ledger.InboxRepo{}, home: map[string]string{}}
	seen := map[string]time.Time{}
	for _, r := range inboxes {
		p.known[[2]string{r.Host, r.Inbox}] = r
		if r.Home != "" && r.SeenAt.After(seen[r.Host]) {
			p.home[r.Host], seen[r.Host] = r.Home, r.SeenAt
		}
	}
	return p, nil
}

// of reports whether a handoff of host's inbox is private; named is false
// for a host the manifest no longer names (it has no privacy to keep).
// An inbox no pull recorded yet is judged by its path (its repository
// is the directory above its harness directory) and its host's newest
// home; its origin is not known yet.
func (p *privacy) of(host, inbox string) (private, named bool) {
	h, ok := p.cfg[host]
	if !ok {
		return false, false
	}
	r, known := p.known[[2]string{host, inbox}]
	if !known {
		r = ledger.InboxRepo{Host: host, Inbox: inbox, Home: p.home[host]}
		if ingest.Harness(inbox) != "" {
			r.Repo = path.Dir(path.Dir(inbox))
		}
	}
	if h.PrivateAt(inbox, r.Home) {
		return true, true
	}
	if r.Repo != "" {
		if e := p.m.RepoFor(host, r.Repo, r.Home, r.Origin); e >= 0 && p.m.Repos[e].Private {
			return true, true
		}
	}
	return false, true
}

// PrivateTargets returns, for each host of the manifest, the cards and
// documents (workspace paths) that a private handoff of another host
// wrote: its mirror must not hold them. A host the manifest no longer
// names has no privacy to keep: its writes are not withheld.
func PrivateTargets(ctx context.Context, led *ledger.Ledger, m *manifest.Manifest) (map[string][]string, error) {
	if !m.KeepsPrivate() {
		// Nothing is private: nothing to withhold, and no read of every
		// source the workspace stored.
		return map[string][]string{}, nil
	}
	writes, err := led.Writes(ctx)
	if err != nil {
		return nil, err
	}
	pv, err := newPrivacy(ctx, led, m)
	if err != nil {
		return nil, err
	}
	private := map[string]map[string]bool{} // writer host -> targets
	for _, w := range writes {
		if priv, _ := pv.of(w.Host, w.Inbox); priv {
			if private[w.Host] == nil {
				private[w.Host] = map[string]bool{}
			}
			private[w.Host][w.Target] = true
		}
	}
	out := map[string][]string{}
	for name := range pv.cfg {
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

// PrivateAppends returns the ingester's HoldPrivate rule
// (ingest.Options): a private handoff's append to a document that exists
// and is not private already (written by no handoff, or by a public one)
// waits in review (private-append), so that the shared document keeps
// reaching every host and the private bytes never enter it. A document
// that only private handoffs wrote, or that does not exist yet, takes the
// append: it is withheld from the other hosts (PrivateTargets) as before.
// The rule is taken from the ledger as the run starts; PrivateTargets,
// judged at every publish, stays the guarantee for what it cannot know
// yet (a clone whose origin makes it private, first seen in this run).
//
// A manifest that keeps nothing private holds nothing and reads nothing.
// Otherwise the ledger is read once, when the rule is first asked (a
// handoff is planned), so that an idle run reads nothing either: every
// source a workspace ever stored is a row of that read (0.2 s of an idle
// tick at 16,000 handoffs). If the read fails, a private handoff's write
// to any existing target is held: what cannot be known is not shared.
func PrivateAppends(ctx context.Context, led *ledger.Ledger, m *manifest.Manifest) func(host, inbox, target string, exists bool) bool {
	if !m.KeepsPrivate() {
		return nil
	}
	var (
		once        sync.Once
		pv          *privacy
		privateOnly = map[string]bool{} // only private handoffs wrote it
	)
	load := func() {
		var err error
		if pv, err = newPrivacy(ctx, led, m); err != nil {
			pv = &privacy{m: m, cfg: hostConfigs(m)}
			return
		}
		writes, err := led.Writes(ctx)
		if err != nil {
			return
		}
		public := map[string]bool{} // a public handoff wrote it
		for _, w := range writes {
			if priv, named := pv.of(w.Host, w.Inbox); priv || !named {
				if !public[w.Target] {
					privateOnly[w.Target] = true
				}
				continue
			}
			public[w.Target] = true
			delete(privateOnly, w.Target)
		}
	}
	return func(host, inbox, target string, exists bool) bool {
		once.Do(load)
		if priv, _ := pv.of(host, inbox); !priv || !exists {
			return false
		}
		return !privateOnly[target]
	}
}

// hostConfigs is the manifest's hosts by name.
func hostConfigs(m *manifest.Manifest) map[string]manifest.HostConfig {
	out := map[string]manifest.HostConfig{}
	for _, h := range m.HostConfigs() {
		out[h.Name] = h
	}
	return out
}
