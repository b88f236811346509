package continuity

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/repoid"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// maxSources bounds the ledger rows one build reads of each host (its
// share): every repository's RECENT.md at its count bound, with room for
// threads. Rows that are no handoff are not read (ledger.RepoSources),
// so no host's junk or handoffs push another host's out.
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
	key   string
	entry int // the manifest's repos entry, or -1
	// owner is the host a private repository belongs to: its handoffs,
	// origins and paths are that host's alone, and only its mirror shows
	// them. "" for a repository every host may see.
	owner   string
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
	unread  int // its handoffs in the window that were not read
	// capped: the inbox has more handoffs in the window than the ledger
	// counts (ledger.MaxInboxRows), so unread is a lower bound.
	capped bool
}

// item is one handoff of a repository, with whether it is private to the
// host it came from.
type item struct {
	host    string
	private bool
	src     ledger.RepoSource
	recent  mirror.RecentHandoff
	// earlier are the earlier versions of its file, newest first.
	earlier []string
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
		out[h.Name] = mirror.ReposFilesReach(view(in.Manifest, repos, h.Name), in.Limits, in.Now, mirror.NewReach(h, homeOf(repos, h.Name)))
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
		// An origin an earlier version stored with a query, fragment or
		// white space is cut or dropped: it is shown to every host.
		r.Origin = repoid.Reduce(r.Origin)
		entry := m.RepoFor(r.Host, r.Repo, r.Home, r.Origin)
		private := h.PrivateAt(r.Inbox, r.Home) || entry >= 0 && m.Repos[entry].Private
		// Privacy is per host: a private inbox's repository is its
		// host's own, never joined with another host's clones of it, so
		// that a clone claiming its origin elsewhere neither adds to its
		// notes nor learns its entry's other origins or name.
		key, owner := keyOf(r, entry), ""
		if private {
			key, owner = "private:"+r.Host+":"+key, r.Host
		}
		rp := byKey[key]
		if rp == nil {
			rp = &repo{key: key, entry: entry, owner: owner}
			if entry >= 0 && owner == "" {
				rp.origins = slices.Clone(m.Repos[entry].Origins)
			}
			byKey[key] = rp
		}
		if r.Origin != "" && !slices.Contains(rp.origins, r.Origin) {
			rp.origins = append(rp.origins, r.Origin)
		}
		// A host whose notes stay home (share_notes: false) shares its
		// repositories, but its handoffs and clones are shown on its
		// own mirror alone.
		rp.rows = append(rp.rows, row{InboxRepo: r, private: private || h.KeepNotes})
		repoOf[[2]string{r.Host, r.Inbox}] = rp
	}

	srcs, err := in.Ledger.RepoSources(ctx, slices.Sorted(maps.Keys(hostCfg)), in.Now.Add(-in.Limits.Age), in.Limits.Count, maxSources)
	if err != nil {
		return nil, err
	}
	// What each inbox holds beyond the rows read, for RECENT.md's count
	// of what it leaves out.
	given := map[[2]string]int{}
	for _, s := range srcs {
		k := [2]string{s.Host, s.Inbox}
		given[k]++
		if rp := repoOf[k]; rp != nil {
			for i := range rp.rows {
				if rp.rows[i].Host == s.Host && rp.rows[i].Inbox == s.Inbox {
					rp.rows[i].unread = s.InboxRows
					rp.rows[i].capped = s.InboxRows > ledger.MaxInboxRows
				}
			}
		}
	}
	for _, rp := range byKey {
		for i := range rp.rows {
			r := &rp.rows[i]
			r.unread = max(r.unread-given[[2]string{r.Host, r.Inbox}], 0)
		}
	}
	var review []string
	for _, s := range srcs {
		// Decisions about those that waited, and the edits that made
		// those that were never on a host.
		if res := resultOf(s); res == receipts.ResultReview || s.ArchivedAs == "" {
			review = append(review, s.SHA256)
		}
	}
	decisions, err := in.Ledger.DecisionsFor(ctx, review)
	if err != nil {
		return nil, err
	}
	seen := map[[2]string]bool{} // repo key, sha: one entry per content
	for _, s := range srcs {
		rp := repoOf[[2]string{s.Host, s.Inbox}]
		if rp == nil || seen[[2]string{rp.key, s.SHA256}] || resultOf(s) == receipts.ResultMalformed {
			continue
		}
		seen[[2]string{rp.key, s.SHA256}] = true
		private := false
		for _, r := range rp.rows {
			if r.Host == s.Host && r.Inbox == s.Inbox {
				private = r.private
			}
		}
		rp.items = append(rp.items, item{host: s.Host, private: private, src: s,
			recent: mirror.RecentHandoff{At: s.StoredAt, Host: s.Host, SHA256: s.SHA256}})
	}
	// Only a host's first Count handoffs of a repository, in the order
	// RECENT.md takes them (mirror.Newer), can be shown: only those are
	// read and parsed, so an idle build's work does not grow with a
	// repository's history.
	// What RECENT.md shows of a handoff is kept in the ledger (notes)
	// the first time its bytes are read here, so that prune, which
	// deletes the bytes, never blanks it; a kept note is read instead of
	// the bytes.
	// A file its writer rewrote in place is one item: its newest
	// version, which names the earlier ones (issue 48).
	var shown []*item
	var want []string
	for _, rp := range byKey {
		slices.SortStableFunc(rp.items, func(a, b item) int { return mirror.Newer(a.recent, b.recent) })
		newest := map[ledger.NameKey]*item{}
		kept := rp.items[:0]
		for _, it := range rp.items {
			k := ledger.NameKey{Host: it.src.Host, Inbox: it.src.Inbox, Name: it.src.Name}
			if n := newest[k]; n != nil && it.src.ArchivedAs != "" {
				n.earlier = append(n.earlier, it.src.SHA256)
				continue
			}
			kept = append(kept, it)
			if it.src.ArchivedAs != "" {
				newest[k] = &kept[len(kept)-1]
			}
		}
		rp.items = kept
		taken := map[string]int{}
		for i := range rp.items {
			it := &rp.items[i]
			if taken[it.host] >= in.Limits.Count {
				it.recent = recentOf(it.src, nil, decisions)
				it.recent.Withheld = "not read: older than what RECENT.md shows"
				continue
			}
			taken[it.host]++
			shown = append(shown, it)
			want = append(want, it.src.SHA256)
		}
	}
	kept, err := in.Ledger.Notes(ctx, want)
	if err != nil {
		return nil, err
	}
	var keep []ledger.Note
	for _, it := range shown {
		sha := it.src.SHA256
		n, ok := kept[sha]
		if !ok {
			// Read once per content; a zero note means its bytes are gone.
			if h := parse(in.Spool, sha); h != nil {
				n = noteOf(sha, h)
				keep = append(keep, n)
			}
			kept[sha] = n
		}
		if n.SHA256 == "" {
			it.recent = recentOf(it.src, nil, decisions)
		} else {
			it.recent = recentOf(it.src, &n, decisions)
		}
	}
	for _, rp := range byKey {
		for i := range rp.items {
			rp.items[i].recent.Earlier = rp.items[i].earlier
		}
	}
	if err := in.Ledger.KeepNotes(ctx, keep); err != nil {
		// Not fatal: the notes are kept at the next build.
		in.Log.Warn("continuity: could not keep the notes RECENT.md shows", "err", err)
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

// noteOf is what RECENT.md may show of a parsed handoff: its text, or
// only why it is withheld.
func noteOf(sha string, h *ingest.Handoff) ledger.Note {
	n := ledger.Note{SHA256: sha, Continues: ingest.ContinuesKey(h.Continues)}
	if why := h.WithheldReason(); why != "" {
		n.Withheld = why
		return n
	}
	n.Type, n.Title, n.Summary = h.Type, h.Title, h.Summary
	n.Facts = h.Sections[ingest.SectionDurableFacts]
	if ingest.IsPlaceholder(n.Facts) {
		n.Facts = ""
	}
	n.OpenQuestions, n.NextSteps = h.OpenQuestions, h.NextSteps
	return n
}

// recentOf is a source as RECENT.md shows it, from the note kept of its
// content (nil when none is kept and its bytes are gone).
func recentOf(s ledger.RepoSource, n *ledger.Note, ds []ledger.Decision) mirror.RecentHandoff {
	r := mirror.RecentHandoff{At: s.StoredAt, Host: s.Host, Harness: ingest.Harness(s.Inbox), Name: s.Name, SHA256: s.SHA256,
		Continues: s.Continues, Became: became(s, ds)}
	for _, d := range ds {
		if d.Decision == ledger.DecisionEdited && d.NewSHA256 == s.SHA256 && s.ArchivedAs == "" {
			r.Edited = true // review edit wrote these bytes; no host had them
		}
	}
	if n == nil {
		r.Withheld = "its text is no longer stored (pruned before a build kept it)"
		return r
	}
	if r.Continues == "" {
		r.Continues = n.Continues
	}
	why := n.Withheld
	if why == "" {
		why = ingest.NameWithheldReason(s.Name, r.Continues)
	}
	if why != "" {
		r.Withheld = why
		return r
	}
	r.Type, r.Title, r.Summary, r.Facts = n.Type, n.Title, n.Summary, n.Facts
	r.OpenQuestions, r.NextSteps = n.OpenQuestions, n.NextSteps
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

// slugs gives each repository its slug. Repositories every host may see
// get theirs first, from what every host may know: a public entry's
// name, else one derived from the origin's (or the directory's) last
// part. Then each host's private repositories, against those and that
// host's others alone: a private entry's name where its paths name the
// host (a clone found by origin alone may be any host's claim to it),
// else a derived slug. So no private entry changes a slug another host
// sees, or shows its name on a host it does not name. A derived slug
// two repositories would share gets a short hash of the repository's
// key.
func slugs(m *manifest.Manifest, repos []*repo) {
	taken := map[string]bool{}
	var public []*repo
	private := map[string][]*repo{}
	for _, rp := range repos {
		if rp.owner != "" {
			private[rp.owner] = append(private[rp.owner], rp)
			continue
		}
		public = append(public, rp)
		if rp.entry >= 0 && m.Repos[rp.entry].Name != "" {
			rp.slug = m.Repos[rp.entry].Name
			taken[rp.slug] = true
		}
	}
	derive(public, taken)
	for _, host := range slices.Sorted(maps.Keys(private)) {
		own := maps.Clone(taken)
		for _, rp := range private[host] {
			if rp.entry < 0 {
				continue
			}
			e := m.Repos[rp.entry]
			names := slices.ContainsFunc(e.Paths, func(p manifest.RepoPath) bool { return p.Host == host })
			if e.Private && e.Name != "" && names && !own[e.Name] {
				rp.slug = e.Name
				own[rp.slug] = true
			}
		}
		derive(private[host], own)
	}
}

// derive gives each of repos without a slug one derived from its base,
// not in taken, with a short hash of its key when two of them share a
// base or the base is taken; it adds each to taken.
func derive(repos []*repo, taken map[string]bool) {
	bases := map[string]int{}
	var todo []*repo
	for _, rp := range repos {
		if rp.slug == "" {
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
	privateHere := map[manifest.RepoPath]bool{}
	for _, rp := range repos {
		if rp.owner == host {
			for _, r := range rp.rows {
				privateHere[manifest.RepoPath{Host: host, Path: r.Repo}] = true
			}
		}
	}
	for _, rp := range repos {
		if rp.owner != "" && rp.owner != host {
			continue
		}
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
		if rp.entry >= 0 && rp.owner == "" {
			mr.Origins = slices.Clone(m.Repos[rp.entry].Origins)
		}
		for _, r := range rp.rows {
			if !visible(r.Host, r.private) {
				continue
			}
			hosts[r.Host] = true
			mr.Older += r.unread
			mr.OlderAtLeast = mr.OlderAtLeast || r.capped
			// A private repository lists its clones' paths even when
			// they have an origin, so that context on its host finds it
			// before a public repository another host claims that origin
			// for.
			if p := (manifest.RepoPath{Host: r.Host, Path: r.Repo}); (r.Origin == "" || rp.owner != "") && !slices.Contains(mr.Paths, p) {
				mr.Paths = append(mr.Paths, p)
			}
			if r.Origin != "" && !slices.Contains(mr.Origins, r.Origin) {
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
					if rp.owner == "" && privateHere[cp] {
						continue // that clone's notes are its host's private repository's
					}
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
