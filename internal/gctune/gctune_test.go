package gctune

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, limit uint64
		want        int
	}{
		{0, 64 * mib, Most},
		{1 * mib, 64 * mib, Most},      // small heap: the most
		{64 * mib / 5, 64 * mib, Most}, // goal exactly the cap
		{16 * mib, 64 * mib, 300},      // goal the cap: 16 × 4
		{32 * mib, 64 * mib, Least},    // half the cap: GOGC=100 reaches it
		{48 * mib, 64 * mib, Least},    // past half: never below the default
		{4096 * mib, 64 * mib, Least},  // far past
		{3 * mib, 64 * mib, Most},      // 64/3 - 1 > 4
		{20 * mib, 64 * mib, 220},      // 64/20 = 3.2
		{1, 1 << 63, Most},             // no overflow
	} {
		if got := Percent(c.live, c.limit); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.limit, got, c.want)
		}
	}
}

func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitGOGC collects until the tuner has set the percentage to want.
func waitGOGC(t *testing.T, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != want {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, want %d", gogc(), want)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

var sink []byte

// The subtests share the process's collector, so they run in this order
// in one test.
func TestStart(t *testing.T) {
	t.Run("GOGC set", func(t *testing.T) {
		t.Setenv("GOGC", "150")
		before := gogc()
		start(1 << 40)
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if got := gogc(); got != before {
			t.Errorf("with GOGC set Start changed the percentage: %d, was %d", got, before)
		}
	})
	t.Run("follows the live heap", func(t *testing.T) {
		if v, ok := os.LookupEnv("GOGC"); ok {
			t.Setenv("GOGC", v)
			os.Unsetenv("GOGC")
		}
		const limit = Cap
		start(limit)
		if got := gogc(); got != Most {
			t.Fatalf("GOGC after Start = %d, want %d", got, Most)
		}
		sink = make([]byte, limit) // live heap past half the cap
		waitGOGC(t, Least)
		sink = nil // live heap back to the test binary's
		waitGOGC(t, Most)
	})
}
