package fanout

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// The bound holds, and every call has returned when Each does.
func TestEachBound(t *testing.T) {
	var running, peak, done atomic.Int64
	err := Each(context.Background(), 50, 4, func(ctx context.Context, i int) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		done.Add(1)
		return nil
	})
	if err != nil || done.Load() != 50 || peak.Load() > 4 || peak.Load() < 2 {
		t.Errorf("err %v, done %d, peak %d; want nil, 50, 2..4", err, done.Load(), peak.Load())
	}
}

// The first error cancels the others and is returned; nothing starts
// after it.
func TestEachFirstError(t *testing.T) {
	boom := errors.New("boom")
	var started atomic.Int64
	err := Each(context.Background(), 1000, 1, func(ctx context.Context, i int) error {
		started.Add(1)
		if i == 3 {
			return boom
		}
		return ctx.Err()
	})
	if !errors.Is(err, boom) || started.Load() > 5 {
		t.Errorf("err %v after %d calls; want boom after about 4", err, started.Load())
	}
}

// TestHostsAtOnce: the default fan-out is every host up to what half the
// available memory holds at WorkerBudget a worker, at most MaxHosts, never
// fewer than MinHosts (today's default) nor more than the hosts.
// Invariant: a fleet of 32 is pulled in one wave on a machine with the
// memory for it, and the default never exceeds the memory bound above 8.
func TestHostsAtOnce(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		hosts     int
		available uint64
		want      int
	}{
		{0, 8 * gib, 1},
		{3, 8 * gib, 3},
		{32, 8 * gib, 32},    // 4 GiB / 64 MiB = 64
		{128, 8 * gib, 64},   // capped
		{32, 1 * gib, 8},     // 512 MiB / 64 MiB = 8
		{32, 1536 << 20, 12}, // 768 MiB / 64 MiB
		{32, 100 << 20, 8},   // never below the old default
		{32, 0, 8},           // memory unknown
		{5, 100 << 20, 5},
	} {
		if got := HostsAtOnce(c.hosts, c.available); got != c.want {
			t.Errorf("HostsAtOnce(%d, %d MiB) = %d, want %d", c.hosts, c.available>>20, got, c.want)
		}
	}
	if a := Available(); a == 0 {
		if _, err := os.Stat("/proc/meminfo"); err == nil {
			t.Error("Available read nothing from /proc/meminfo")
		}
	}
}
