package claim

import (
	"context"
	"sync"

	"github.com/handoff-sync/handoff/internal/fanout"
	"github.com/handoff-sync/handoff/internal/repoid"
)

// Bounds on reading repositories' identities in one pull.
const (
	// maxRepoReads bounds the repositories whose identity one pull reads;
	// the others' inboxes report none this run (a later run reads them).
	maxRepoReads = 1024
	// repoReadsAtOnce bounds the identities read concurrently. Each is
	// a chain of up to five round trips (the .git, a commondir, the
	// config's LSTAT, OPEN and READs), and the pull waits for the last:
	// 32 at once left the last four of 100 repositories reading for
	// half a second after every claim was done. The reads share the
	// claims' bound on open files (openLimit).
	repoReadsAtOnce = 256
)

// repoReads reads, alongside the pull, the identity (repoid.Read) of each
// repository one of whose inboxes holds a candidate: only those, so that
// an idle run asks nothing more of the host.
type repoReads struct {
	wg   sync.WaitGroup
	ids  map[string]repoid.Identity // by repository directory
	home string
}

// startRepoReads starts reading the identities of the repositories of
// inboxes holding candidates, and the host's home (for the manifest's
// "~" paths on the canonical side). Nil when cfg.Repos is off or no inbox
// holds a candidate.
func (p *puller) startRepoReads(ctx context.Context, inboxes []*Inbox) *repoReads {
	if !p.cfg.Repos {
		return nil
	}
	var repos []string
	seen := map[string]bool{}
	for _, in := range inboxes {
		if len(in.Candidates) > 0 && in.Repo != "" && !seen[in.Repo] {
			seen[in.Repo] = true
			repos = append(repos, in.Repo)
		}
	}
	if len(repos) == 0 {
		return nil
	}
	if len(repos) > maxRepoReads {
		p.log.Warn("too many repositories with handoffs to read their identities in one run; the rest are read by later runs",
			"host", p.cfg.Host, "repositories", len(repos), "read", maxRepoReads)
		repos = repos[:maxRepoReads]
	}
	r := &repoReads{ids: make(map[string]repoid.Identity, len(repos))}
	var mu sync.Mutex
	r.wg.Go(func() {
		if home, err := p.checks.Home(ctx); err == nil {
			r.home = home
		}
	})
	r.wg.Go(func() {
		fanout.Each(ctx, len(repos), repoReadsAtOnce, func(ctx context.Context, i int) error {
			id := repoid.Read(ctx, p.checks, repos[i])
			if id.Problem != "" {
				p.log.Warn("repository identity not read; it is known by host and path", "host", p.cfg.Host, "repo", repos[i], "problem", id.Problem)
			}
			mu.Lock()
			r.ids[repos[i]] = id
			mu.Unlock()
			return nil
		})
	})
	return r
}

// finish waits for the reads and puts each identity on its inboxes'
// reports.
func (r *repoReads) finish(p *puller, inboxes []*Inbox) {
	if r == nil {
		return
	}
	r.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	repoOf := map[string]string{}
	for _, in := range inboxes {
		repoOf[in.Path] = in.Repo
	}
	for i := range p.report.Inboxes {
		ir := &p.report.Inboxes[i]
		if id, ok := r.ids[repoOf[ir.Path]]; ok {
			ir.Repo = &id
		}
	}
	p.report.Home = r.home
}
