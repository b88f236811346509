package fanout

import (
	"context"
	"errors"
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
