// Package failpoint kills the process at named steps so that tests can prove
// crash recovery. It is inert unless the HANDOFF_FAILPOINT environment
// variable names a point; production runs never set it.
//
// HANDOFF_FAILPOINT=name kills the process with SIGKILL the first time the
// named point is reached; name@N kills it on the N-th time. SIGKILL cannot be
// caught, so no deferred cleanup runs: exactly what a power cut or an OOM
// kill looks like to the file system and the ledger.
//
// name:pause (or name@N:pause) stops there instead, for a test that
// signals the process at a known step: it prints "failpoint: paused at
// name" on stderr and waits until the process gets SIGINT or SIGTERM
// (at most PauseMax), then lets the process see the signal (its own
// handler, such as signal.NotifyContext, gets it as well) and goes on.
package failpoint

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Env is the environment variable that arms a failpoint.
const Env = "HANDOFF_FAILPOINT"

// Names lists the failpoints of the pull and the ingester, which every run
// reaches, in pipeline order.
var Names = []string{
	"store.sent",           // a pull worker sent a batch's bytes and sources to the run, not yet told they are committed
	"store.recorded",       // a batch's bytes and sources committed in the ledger, remote not yet archived
	"ack.renamed",          // one source archived on its host
	"plan.recorded",        // a batch's plan rows committed, no backup yet
	"backup.written",       // backups of a batch's targets durable
	"review.written",       // a batch's review drafts durable, results not yet recorded
	"batch.files-synced",   // a batch's new files durable (backups, drafts, targets' new contents under temporary names), no target replaced
	"commit.written",       // one target replaced, its directory not yet synced, bookkeeping not done
	"batch.targets-synced", // a batch's targets replaced and their directories synced, results not yet recorded
	"bookkeeping.done",     // results recorded
	"receipt.written",      // receipt file written, latest.json not yet replaced
}

// MirrorNames lists the failpoints of a mirror's publish, in order; only a
// run with a mirrored host reaches them.
var MirrorNames = []string{
	"mirror.opened",       // MIRROR.json says complete: false, no file of the mirror changed yet
	"mirror.tmp-written",  // one mirror file written under its temporary name, not renamed
	"mirror.replaced",     // one mirror file renamed into place
	"mirror.sums-written", // SHA256SUMS renamed into place, removals not done
	"mirror.removed",      // one file gone from canonical memory removed from the mirror
}

// ReviewNames lists the failpoints of `handoff review accept`, `edit` and
// `reject`, in order. Accept and edit also pass the ingester's own
// backup.written, commit.written and bookkeeping.done between
// review.planned and review.decided.
var ReviewNames = []string{
	"review.edit-stored",   // edit: the edited handoff durable in the spool, nothing in the ledger
	"review.planned",       // accept, edit: the plan and the started decision committed, nothing applied
	"review.decided",       // the decision done in the ledger, its draft still in the review inbox
	"review.draft-removed", // the draft removed, not yet marked so in the ledger; no receipt yet
}

// UpgradeNames lists the failpoints of the one-time moves an upgrade
// makes in a workspace, in order; only a workspace an earlier version
// left them to reaches them.
var UpgradeNames = []string{
	"drafts.moved", // one review draft moved out of memory/handoff-inbox, its directories not yet synced
}

// Bounds of the pause action: it never waits longer than PauseMax, so a
// test that fails to signal cannot hang; after the signal it waits
// pauseSettle, so that the process's own handler has acted on it before
// the code after the point runs.
const (
	PauseMax    = time.Minute
	pauseSettle = 200 * time.Millisecond
)

var (
	once   sync.Once
	armed  string
	target int
	pause  bool
	mu     sync.Mutex
	hits   = map[string]int{}
	known  = map[string]bool{}
)

func load() {
	for _, n := range Names {
		known[n] = true
	}
	for _, n := range ReviewNames {
		known[n] = true
	}
	for _, n := range MirrorNames {
		known[n] = true
	}
	for _, n := range UpgradeNames {
		known[n] = true
	}
	v := os.Getenv(Env)
	if v == "" {
		return
	}
	v, pause = strings.CutSuffix(v, ":pause")
	name, count, found := strings.Cut(v, "@")
	target = 1
	if found {
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "handoff: ignoring %s=%q: count must be a positive integer\n", Env, v)
			return
		}
		target = n
	}
	armed = name
}

// Inject marks a point in the code. It does nothing unless armed for name.
func Inject(name string) {
	once.Do(load)
	if !known[name] {
		panic("failpoint: unknown name " + name)
	}
	if armed != name {
		return
	}
	mu.Lock()
	hits[name]++
	n := hits[name]
	mu.Unlock()
	if n != target {
		return
	}
	if pause {
		pauseHere(name)
		return
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is delivered asynchronously; never continue
}

// pauseHere waits at name for SIGINT or SIGTERM, at most PauseMax. The
// signal is watched before the line is printed, so a test may signal as
// soon as it reads it.
func pauseHere(name string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	fmt.Fprintf(os.Stderr, "failpoint: paused at %s\n", name)
	select {
	case <-sig:
		time.Sleep(pauseSettle)
	case <-time.After(PauseMax):
	}
}
