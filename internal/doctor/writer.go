package doctor

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/continuity"
	"github.com/handoff-sync/handoff/internal/harness"
	"github.com/handoff-sync/handoff/internal/harness/claude"
	"github.com/handoff-sync/handoff/internal/harness/codex"
	"github.com/handoff-sync/handoff/internal/harness/session"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/transport"
)

// Bounds of the writer-side checks.
const (
	// MirrorStaleWarn is how long ago a mirror may have been published
	// before doctor warns: a publish writes only what changed, so an old
	// mirror may only mean that nothing changed.
	MirrorStaleWarn = 7 * 24 * time.Hour
	// maxSumsFile bounds SHA256SUMS and maxMirrorBytes what is hashed.
	maxSumsFile    = 8 << 20
	maxMirrorBytes = 1 << 30
	// maxPendingRead bounds one pending handoff read for lint.
	maxPendingRead = 4 << 20
	// maxListed bounds the names a check lists.
	maxListed = 5
)

// noFollow refuses a final symlink where doctor opens a file itself.
const noFollow = unix.O_NOFOLLOW

// WriterOptions configure RunWriter.
type WriterOptions struct {
	Mirror  string // the host's mirror directory, absolute
	Dir     string // the current directory: its repository is checked
	Program string // the handoff binary the hooks should run, absolute
	// Extra are the arguments install gives the hooks (--mirror DIR).
	Extra []string
	Now   func() time.Time
}

// RunWriter checks a writer host, one with a mirror and no manifest: the
// mirror (present, complete, fresh, every file as SHA256SUMS lists it),
// the harness hooks (installed and current), and the repository holding
// Dir (an inbox, pending handoffs that lint clean). Scope is "writer".
//
// Guarantees: it reads only (the mirror, the harnesses' files, the
// repository's inboxes), each read bounded, and writes nothing.
func RunWriter(ctx context.Context, o WriterOptions) *Report {
	if o.Now == nil {
		o.Now = time.Now
	}
	rep := &Report{Checks: []Check{}, OK: true}
	add := func(name, status, msg, hint string) {
		if status == CheckFail {
			rep.OK = false
		}
		if status == CheckOK {
			hint = ""
		}
		rep.Checks = append(rep.Checks, Check{Scope: "writer", Name: name, Status: status, Message: msg, Hint: hint})
	}
	info, ok := writerMirror(o, add)
	if ok {
		writerSums(ctx, o.Mirror, info, add)
	}
	writerHooks(o, add)
	writerRepo(ctx, o, add)
	return rep
}

func writerMirror(o WriterOptions, add func(name, status, msg, hint string)) (*mirror.Info, bool) {
	name := filepath.Join(o.Mirror, mirror.InfoFile)
	f, err := os.Open(name)
	if err != nil {
		add("mirror", CheckFail, fmt.Sprintf("no mirror at %s (%v)", o.Mirror, err),
			"on the canonical host, give this host a mirror in the manifest (mirror: {path: …}) and run handoff sync; or name this host's mirror with --mirror DIR")
		return nil, false
	}
	defer f.Close()
	var info mirror.Info
	if err := json.NewDecoder(io.LimitReader(f, 64<<10)).Decode(&info); err != nil {
		add("mirror", CheckFail, fmt.Sprintf("%s is damaged: %v", name, err), "the canonical host's next sync rewrites it")
		return nil, false
	}
	canon := info.Canonical
	if canon == "" {
		canon = "(not named)"
	}
	add("role", CheckOK, fmt.Sprintf("writer host %q of canonical host %s: no manifest here, syncs run there", info.Host, canon), "")
	age := o.Now().Sub(info.PublishedAt)
	switch {
	case !info.Complete:
		add("mirror", CheckWarn, fmt.Sprintf("a publish to %s is under way (generation %d, started %s ago)", o.Mirror, info.Generation, roundAge(age)),
			"run handoff doctor again in a moment; if it stays so, the canonical host's last sync was interrupted and its next one finishes the publish")
		return &info, false
	case info.PublishedAt.IsZero() || age > MirrorStaleWarn:
		add("mirror", CheckWarn, fmt.Sprintf("mirror %s: generation %d, last published %s ago", o.Mirror, info.Generation, roundAge(age)),
			fmt.Sprintf("a publish writes only what changed, so this may only mean nothing changed; if handoffs written here since are not in it, check the timer on %s (handoff doctor there)", canon))
	default:
		add("mirror", CheckOK, fmt.Sprintf("mirror %s: generation %d, complete, published %s ago by %s", o.Mirror, info.Generation, roundAge(age), canon), "")
	}
	return &info, true
}

// writerSums checks every file SHA256SUMS lists, as `sha256sum -c` does.
func writerSums(ctx context.Context, dir string, info *mirror.Info, add func(name, status, msg, hint string)) {
	name := filepath.Join(dir, mirror.SumsFile)
	f, err := os.Open(name)
	if err != nil {
		add("sums", CheckFail, fmt.Sprintf("%s cannot be read: %v", name, err), "the canonical host's next sync rewrites it")
		return
	}
	defer f.Close()
	var bad []string
	n, budget := 0, int64(maxMirrorBytes)
	sc := bufio.NewScanner(io.LimitReader(f, maxSumsFile))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() && ctx.Err() == nil {
		sum, rel, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 || rel == "" || path.IsAbs(rel) || strings.Contains("/"+rel+"/", "/../") {
			bad = append(bad, fmt.Sprintf("line %q is not a checksum line", sc.Text()))
			continue
		}
		n++
		got, size, err := hashFile(filepath.Join(dir, filepath.FromSlash(rel)), budget)
		budget -= size
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", rel, err))
		case got != sum:
			bad = append(bad, rel+": FAILED")
		}
	}
	if err := sc.Err(); err != nil {
		bad = append(bad, fmt.Sprintf("%s: %v", mirror.SumsFile, err))
	}
	if info.Files > 0 && n != info.Files {
		bad = append(bad, fmt.Sprintf("%s lists %d files, %s says %d", mirror.SumsFile, n, mirror.InfoFile, info.Files))
	}
	if len(bad) > 0 {
		more := ""
		if len(bad) > maxListed {
			more = fmt.Sprintf(" and %d more", len(bad)-maxListed)
			bad = bad[:maxListed]
		}
		add("sums", CheckFail, fmt.Sprintf("the mirror does not match %s: %s%s", mirror.SumsFile, strings.Join(bad, "; "), more),
			"something other than handoff changed the mirror (it is read-only): the canonical host's next sync puts its files back; until then read nothing from the files named")
		return
	}
	add("sums", CheckOK, fmt.Sprintf("every file of %d matches %s", n, mirror.SumsFile), "")
}

func hashFile(name string, budget int64) (string, int64, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("not a regular file")
	}
	if fi.Size() > budget {
		return "", 0, fmt.Errorf("past the %d MiB doctor hashes", maxMirrorBytes>>20)
	}
	h := sha256.New()
	size, err := io.Copy(h, io.LimitReader(f, budget))
	return hex.EncodeToString(h.Sum(nil)), size, err
}

// writerHooks checks the harnesses' hooks in the user scope (and the
// project scope of the repository holding Dir).
func writerHooks(o WriterOptions, add func(name, status, msg, hint string)) {
	repo := ""
	if r, err := continuity.FindRepo(context.Background(), transport.NewLocal(), o.Dir); err == nil {
		repo = filepath.FromSlash(r)
	}
	var current, problems []string
	var hints []string
	status := CheckOK
	for _, hn := range []string{claude.Name, codex.Name} {
		scopes := []string{harness.ScopeUser}
		if repo != "" {
			scopes = append(scopes, harness.ScopeProject)
		}
		for _, sc := range scopes {
			var t harness.Target
			var err error
			if hn == claude.Name {
				t, err = claude.Target(sc, repo, o.Program, o.Extra...)
			} else {
				t, err = codex.Target(sc, repo, o.Program, o.Extra...)
			}
			if err != nil {
				continue
			}
			st := t.Status()
			where := fmt.Sprintf("%s (%s)", hn, sc)
			switch st.State {
			case harness.StateCurrent:
				current = append(current, where)
				hints = append(hints, st.Notes...)
			case harness.StateOutdated:
				status = worse(status, CheckWarn)
				why := "not as install writes them now"
				for _, h := range st.Hooks {
					for _, f := range h.Found {
						if !f.ProgramExists {
							status = CheckFail
							why = f.Program + " no longer exists"
						}
					}
				}
				problems = append(problems, fmt.Sprintf("%s in %s: %s", where, st.Path, why))
				hints = append(hints, fmt.Sprintf("handoff hooks install --harness %s --scope %s", hn, sc))
			case harness.StateUnreadable:
				status = worse(status, CheckWarn)
				problems = append(problems, fmt.Sprintf("%s: %s cannot be read: %s", where, st.Path, st.Err))
				hints = append(hints, "fix "+st.Path)
			}
		}
	}
	switch {
	case len(problems) > 0:
		add("hooks", status, "harness hooks: "+strings.Join(problems, "; "), strings.Join(hints, "; "))
	case len(current) == 0:
		add("hooks", CheckWarn, "no harness hooks installed: sessions here get the last agents' notes and the ask for a handoff only if the agent remembers its instructions",
			"handoff hooks install --harness claude (and/or --harness codex); for harnesses without hooks, handoff instructions prints the block for AGENTS.md")
	default:
		msg := "harness hooks current: " + strings.Join(current, ", ")
		if len(hints) > 0 {
			msg += " (note: " + strings.Join(dedupe(hints), "; ") + ")"
		}
		add("hooks", CheckOK, msg, "")
	}
}

func worse(a, b string) string {
	rank := map[string]int{CheckOK: 0, CheckWarn: 1, CheckFail: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// writerRepo checks the repository holding Dir: an inbox, and that the
// handoffs waiting in it lint clean.
func writerRepo(ctx context.Context, o WriterOptions, add func(name, status, msg, hint string)) {
	r, err := continuity.FindRepo(ctx, transport.NewLocal(), o.Dir)
	if err != nil {
		add("repository", CheckOK, fmt.Sprintf("%s is not inside a repository: its inbox and pending handoffs are not checked", o.Dir), "")
		return
	}
	repo := filepath.FromSlash(r)
	inboxes := session.Inboxes(repo)
	if len(inboxes) == 0 {
		add("repository", CheckWarn, fmt.Sprintf("repository %s has no inbox: a handoff written here has nowhere to go", repo),
			fmt.Sprintf("mkdir -p %s (or .codex/…) and add it to the repository's .gitignore", filepath.Join(repo, claude.Dir, session.InboxDir)))
		return
	}
	add("repository", CheckOK, fmt.Sprintf("repository %s: inbox %s", repo, strings.Join(inboxes, ", ")), "")
	var bad []string
	pending := 0
	for _, ib := range inboxes {
		ents, err := os.ReadDir(ib)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".md") || !e.Type().IsRegular() {
				continue
			}
			pending++
			data, err := readPending(filepath.Join(ib, e.Name()))
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", e.Name(), err))
				continue
			}
			if probs := ingest.Lint(data); len(probs) > 0 {
				bad = append(bad, fmt.Sprintf("%s: %s", e.Name(), probs[0]))
			}
		}
	}
	switch {
	case len(bad) > 0:
		n := len(bad)
		if len(bad) > maxListed {
			bad = bad[:maxListed]
		}
		add("pending", CheckWarn, fmt.Sprintf("%d of %d pending handoff(s) would not pass: %s", n, pending, strings.Join(bad, "; ")),
			"fix each (handoff lint FILE names every problem) before the next sync collects it, or it waits for a person on the canonical host")
	default:
		add("pending", CheckOK, fmt.Sprintf("%d pending handoff(s), each lint-clean", pending), "")
	}
}

func readPending(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPendingRead+1))
	if err == nil && len(data) > maxPendingRead {
		err = fmt.Errorf("larger than %d MiB", maxPendingRead>>20)
	}
	return data, err
}
