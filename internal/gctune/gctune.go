// Package gctune lets the garbage collector run less often while a
// process's live heap is small, and never more often than Go's default.
//
// A sync run and its pull workers keep a few MiB live and allocate
// hundreds of MiB (SSH packets, records, parsed handoffs). At the default
// GOGC=100 a worker collects after every 4 MiB allocated, and the
// collector was 8% of the workers' CPU at the bulk bench cell.
//
// Guarantees, once Start has run and unless the environment sets GOGC:
//   - the heap goal is never below what GOGC=100 gives, so the collector
//     never runs more often than by default, however large the live heap;
//   - while the live heap is under a fifth of the cap, the goal is five
//     times the live heap (GOGC=400); between that and half the cap, the
//     goal is the cap.
//
// No memory limit is set: a soft limit below a large live heap makes the
// collector run back to back, and this package is meant never to do that.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Cap is where Start aims the heap goal while the live heap is small.
// The ingester's bound is 100 MiB of RSS for 10,000 handoffs; this
// leaves room for stacks and the runtime's own memory.
const Cap = 32 << 20

// Most and Least bound the GOGC percentage that Start sets.
const (
	Most  = 400
	Least = 100
)

// Percent is the GOGC percentage that makes the next heap goal, live ×
// (1 + percent/100), come to limit, held between Least and Most.
func Percent(live, limit uint64) int {
	if live == 0 || limit/live >= 1+Most/100 {
		return Most
	}
	p := int(float64(limit)/float64(live)*100) - 100
	return max(Least, min(Most, p))
}

var started sync.Once

// Start sets the GOGC percentage from the live heap after every
// collection, aiming the heap goal at Cap. It does nothing when GOGC is
// set in the environment (that is the user's choice), and only the first
// call in a process counts.
func Start() { start(Cap) }

func start(limit uint64) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return
	}
	started.Do(func() {
		debug.SetGCPercent(Most)
		arm(limit)
	})
}

// arm attaches a cleanup to a fresh allocation. It runs after the first
// collection that finds the allocation unreachable, sets the percentage
// from what that collection left live, and arms the next one.
func arm(limit uint64) {
	runtime.AddCleanup(new([32]byte), tune, limit)
}

func tune(limit uint64) {
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	if live[0].Value.Kind() == metrics.KindUint64 {
		debug.SetGCPercent(Percent(live[0].Value.Uint64(), limit))
	}
	arm(limit)
}
