package continuity

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// maxSources bounds the ledger rows one build reads: every repository's
// RECENT.md at its count bound, with room for duplicates and threads.
const maxSources = 4 * mirror.MaxRepos * 20

// Input is what Build reads.
type Input struct {
	Ledger   *ledger.Ledger
	Spool    spool.Store
	Manifest *manifest.Manifest
	Now      time.Time
	Limits   mirror.RecentLimits // zero: mirror.DefaultRecent
	Log      *slog.Logger
}

// repo is one repository as the whole workspace knows it, before any
// host's view of it.
type repo struct {
	key     string
	entry   int // the manifest's repos entry, or -1
	origins []string
	rows    []row  // the inboxes it is known in
	items   []item // its handoffs, newest first
	slug    string
}

// row is an inbox's repository, with whether the inbox is private to its
// host.
type row struct {
	ledger.InboxRepo
	private bool
}

// item is one handoff of a repository, with whether it is private to the
// host it came from.
type item struct {
	host    string
	private bool
	recent  mirror.RecentHandoff
}

// Build returns, for each of hosts whose mirror includes repos, the files
// of its repos/: every repository with a recent handoff that host may
// see. A host that may see none gets an empty index. Nil when no host
// asks for repos/.
func Build(ctx context.Context, in Input, hosts []manifest.HostConfig) (map[string][]mirror.File, error) {
	var want []manifest.HostConfig
	for _, h := range hosts {
		if h.Mirror.Includes(manifest.MirrorRepos) {
			want = append(want, h)
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	if in.Limits == (mirror.RecentLimits{}) {
		in.Limits = mirror.DefaultRecent
	}
	if in.Log == nil {
		in.Log = slog.New(slog.DiscardHandler)
	}
	repos, err := gather(ctx, in)
	if err != nil {
		return nil, err
	}
	out := map[string][]mirror.File{}
	for _, h := range want {
		out[h.Name] = mirror.ReposFiles(view(in.Manifest, repos, h.Name), in.Limits, in.Now)
	}
	return out, nil
}

// gather reads the ledger and the spool into repositories, each with its
// handoffs (newest first) and the inboxes it is known in, and gives each
// a slug.
func gather(ctx context.Context, in Input) ([]*repo, error) {
	m := in.Manifest
	hostCfg := map[string]manifest.HostConfig{}
	for _, h := range m.HostConfigs() {
		hostCfg[h.Name] = h
	}
	inboxRows, err := in.Ledger.InboxRepos(ctx)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*repo{}
	repoOf := map[[2]string]*repo{} // host, inbox
	for _, r := range inboxRows {
		h, ok := hostCfg[r.Host]
		if !ok {
			continue // a host the manifest no longer names: its privacy is unknown
		}
		entry := m.RepoFor(r.Host, r.Repo, r.Home, r.Origin)
		key := keyOf(r, entry)
		rp := byKey[key]
		if rp == nil {
			rp = &repo{key: key, entry: entry}
			if entry >= 0 {
				rp.origins = slices.Clone(m.Repos[entry].Origins)
			}
			byKey[key] = rp
		}
		if r.Origin != "" && !slices.Contains(rp.origins, r.Origin) {
			rp.origins = append(rp.origins, r.Origin)
		}
		private := h.PrivateAt(r.Inbox, r.Home) || entry >= 0 && m.Repos[entry].Private
		rp.rows = append(rp.rows, row{InboxRepo: r, private: private})
		repoOf[[2]string{r.Host, r.Inbox}] = rp
	}

	srcs, err := in.Ledger.RepoSources(ctx, in.Now.Add(-in.Limits.Age), maxSources)
	if err != nil {
		return nil, err
	}
	var review []string
	for _, s := range srcs {
		if res := resultOf(s); res == receipts.ResultReview {
			review = append(review, s.SHA256)
		}
	}
	decisions, err := in.Ledger.DecisionsFor(ctx, review)
	if err != nil {
		return nil, err
	}
	parsed := map[string]*ingest.Handoff{}
	seen := map[[2]string]bool{} // repo key, sha: one entry per content
	for _, s := range srcs {
		rp := repoOf[[2]string{s.Host, s.Inbox}]
		if rp == nil || seen[[2]string{rp.key, s.SHA256}] || resultOf(s) == receipts.ResultMalformed {
			continue
		}
		h, ok := parsed[s.SHA256]
		if !ok {
			h = parse(in.Spool, s.SHA256)
			parsed[s.SHA256] = h
		}
		if h == nil && s.Result == receipts.ResultMalformed {
			continue
		}
		seen[[2]string{rp.key, s.SHA256}] = true
		private := false
		for _, r := range rp.rows {
			if r.Host == s.Host && r.Inbox == s.Inbox {
				private = r.private
			}
		}
		rp.items = append(rp.items, item{host: s.Host, private: private, recent: recentOf(s, h, decisions)})
	}
	var repos []*repo
	for _, rp := range byKey {
		repos = append(repos, rp)
	}
	slices.SortFunc(repos, func(a, b *repo) int { return strings.Compare(a.key, b.key) })
	slugs(m, repos)
	return repos, nil
}

// keyOf is a repository's key across the workspace: its manifest entry,
// else its origin, else its host and path.
func keyOf(r ledger.InboxRepo, entry int) string {
	switch {
	case entry >= 0:
		return fmt.Sprintf("entry:%d", entry)
	case r.Origin != "":
		return "origin:" + r.Origin
	}
	return "path:" + r.Host + ":" + r.Repo
}

func resultOf(s ledger.RepoSource) string {
	if s.Content != nil {
		return s.Content.Result
	}
	return s.Result
}

// parse reads and parses a stored handoff; nil when it is gone from the
// spool, too big, or no handoff.
func parse(sp spool.Store, sha string) *ingest.Handoff {
	data, err := sp.Get(sha)
	if err != nil || len(data) > maxHandoff {
		return nil
	}
	h, err := ingest.Parse(data)
	if err != nil {
		return nil
	}
	return h
}

// recentOf is a source as RECENT.md shows it.
func recentOf(s ledger.RepoSource, h *ingest.Handoff, ds []ledger.Decision) mirror.RecentHandoff {
	r := mirror.RecentHandoff{At: s.StoredAt, Host: s.Host, Harness: ingest.Harness(s.Inbox), Name: s.Name, SHA256: s.SHA256,
		Continues: s.Continues, Became: became(s, ds)}
	if h == nil {
		r.Withheld = "its bytes are no longer stored"
		return r
	}
	if r.Continues == "" {
		r.Continues = ingest.ContinuesKey(h.Continues)
	}
	if why := h.WithheldReason(); why != "" {
		r.Withheld = why
		return r
	}
	r.Type, r.Title, r.Summary = h.Type, h.Title, h.Summary
	r.Facts = h.Sections[ingest.SectionDurableFacts]
	if ingest.IsPlaceholder(r.Facts) {
		r.Facts = ""
	}
	r.OpenQuestions, r.NextSteps = h.OpenQuestions, h.NextSteps
	return r
}

// became says what became of a source's content.
func became(s ledger.RepoSource, ds []ledger.Decision) string {
	c := s.Content
	if c == nil {
		return "stored; not applied yet (the next sync's ingest decides it)"
	}
	what := func(result, action, target, reason string) string {
		switch result {
		case receipts.ResultPromoted:
			verb := "created"
			if action == ingest.ActionUpdateCard {
				verb = "updated"
			}
			if reason == ingest.ReasonRevised {
				verb = "updated (a revision)"
			}
			return fmt.Sprintf("promoted: card %s %s", target, verb)
		case receipts.ResultRouted:
			return "routed: appended to " + target
		case receipts.ResultDuplicate:
			if reason == ingest.ReasonCardIdentical {
				return fmt.Sprintf("nothing to do: card %s already held it", target)
			}
			return "a copy of an earlier handoff"
		}
		return result
	}
	if c.Result == receipts.ResultReview {
		for i := len(ds) - 1; i >= 0; i-- {
			d := ds[i]
			if d.SHA256 != s.SHA256 || d.State != ledger.DecisionDone {
				continue
			}
			switch d.Decision {
			case ledger.DecisionAccepted:
				return "accepted in review: " + what(d.Result, c.Action, d.Target, d.Reason)
			case ledger.DecisionEdited:
				return "edited in review into handoff " + short(d.NewSHA256)
			case ledger.DecisionRejected:
				return "rejected in review"
			case ledger.DecisionSuperseded:
				return "superseded in review by another version of it"
			}
		}
		return fmt.Sprintf("waits in review (%s) for a person on the canonical host", c.Reason)
	}
	if s.Result == receipts.ResultDuplicate && c.Result != receipts.ResultDuplicate {
		return "a copy of an earlier handoff, which was " + what(c.Result, c.Action, c.Target, c.Reason)
	}
	return what(c.Result, c.Action, c.Target, c.Reason)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// slugs gives each repository its slug: the manifest's name, else one
// derived from the origin's (or the directory's) last part. Repositories
// any host may see get theirs first, so that a private one never changes
// a visible slug; a derived slug two repositories would share gets a
// short hash of the repository's key.
func slugs(m *manifest.Manifest, repos []*repo) {
	taken := map[string]bool{}
	for _, rp := range repos {
		if rp.entry >= 0 && m.Repos[rp.entry].Name != "" {
			rp.slug = m.Repos[rp.entry].Name
			taken[rp.slug] = true
		}
	}
	public := func(rp *repo) bool {
		for _, it := range rp.items {
			if !it.private {
				return true
			}
		}
		return false
	}
	for _, pass := range []bool{true, false} {
		bases := map[string]int{}
		var todo []*repo
		for _, rp := range repos {
			if rp.slug == "" && public(rp) == pass {
				todo = append(todo, rp)
				bases[base(rp)]++
			}
		}
		for _, rp := range todo {
			b := base(rp)
			if bases[b] == 1 && !taken[b] {
				rp.slug = b
			} else {
				sum := sha256.Sum256([]byte(rp.key))
				h := hex.EncodeToString(sum[:])
				for n := 6; ; n += 2 {
					s := strings.TrimRight(clipSlug(b, 63-n-1), "-._") + "-" + h[:n]
					if !taken[s] || n >= len(h) {
						rp.slug = s
						break
					}
				}
			}
			taken[rp.slug] = true
		}
	}
}

// base is the slug a repository would have on its own: the last part of
// its origin's path, else of its directory, lowercased, with anything but
// letters, digits, dots, dashes and underscores made a dash.
func base(rp *repo) string {
	name := ""
	switch {
	case len(rp.origins) > 0:
		name = path.Base(rp.origins[0])
	case len(rp.rows) > 0:
		name = path.Base(rp.rows[0].Repo)
	}
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-._")
	s = strings.TrimSuffix(strings.TrimSuffix(s, ".md"), ".json")
	s = strings.Trim(clipSlug(s, 40), "-._")
	if !manifest.IsRepoSlug(s) {
		return "repo"
	}
	return s
}

func clipSlug(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// view is the repositories as host sees them: only the handoffs and
// inboxes it may see, and the repositories that leaves any handoff of.
func view(m *manifest.Manifest, repos []*repo, host string) []mirror.Repo {
	var out []mirror.Repo
	for _, rp := range repos {
		visible := func(h string, private bool) bool { return !private || h == host }
		mr := mirror.Repo{Slug: rp.slug}
		for _, it := range rp.items {
			if visible(it.host, it.private) {
				mr.Handoffs = append(mr.Handoffs, it.recent)
			}
		}
		if len(mr.Handoffs) == 0 {
			continue
		}
		hosts := map[string]bool{}
		if rp.entry >= 0 {
			mr.Origins = slices.Clone(m.Repos[rp.entry].Origins)
		}
		for _, r := range rp.rows {
			if !visible(r.Host, r.private) {
				continue
			}
			hosts[r.Host] = true
			switch {
			case r.Origin == "":
				p := manifest.RepoPath{Host: r.Host, Path: r.Repo}
				if !slices.Contains(mr.Paths, p) {
					mr.Paths = append(mr.Paths, p)
				}
			case !slices.Contains(mr.Origins, r.Origin):
				mr.Origins = append(mr.Origins, r.Origin)
			}
		}
		if rp.entry >= 0 {
			// The entry's own paths on this host, for a clone here that
			// has sent nothing yet.
			e := m.Repos[rp.entry]
			for _, p := range e.Paths {
				if p.Host != host {
					continue
				}
				home := homeOf(repos, host)
				if full := manifest.ExpandHome(p.Path, home); !strings.HasPrefix(full, "~") {
					cp := manifest.RepoPath{Host: host, Path: path.Clean(full)}
					if !slices.Contains(mr.Paths, cp) {
						mr.Paths = append(mr.Paths, cp)
					}
				}
			}
		}
		for h := range hosts {
			mr.Hosts = append(mr.Hosts, h)
		}
		slices.Sort(mr.Hosts)
		slices.SortFunc(mr.Paths, func(a, b manifest.RepoPath) int {
			return cmp.Or(strings.Compare(a.Host, b.Host), strings.Compare(a.Path, b.Path))
		})
		out = append(out, mr)
	}
	return out
}

// homeOf is the newest home a pull of host recorded, "" when none did.
func homeOf(repos []*repo, host string) string {
	var home string
	var at time.Time
	for _, rp := range repos {
		for _, r := range rp.rows {
			if r.Host == host && r.Home != "" && r.SeenAt.After(at) {
				home, at = r.Home, r.SeenAt
			}
		}
	}
	return home
}
