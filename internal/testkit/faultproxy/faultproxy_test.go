package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// target is a TCP server on 127.0.0.1:0 that runs handle for each
// connection and counts them.
type target struct {
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func startTarget(t *testing.T, handle func(net.Conn)) *target {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{ln: ln}
	tg.wg.Add(1)
	go func() {
		defer tg.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tg.accepted.Add(1)
			tg.mu.Lock()
			tg.conns = append(tg.conns, c)
			tg.mu.Unlock()
			tg.wg.Add(1)
			go func() {
				defer tg.wg.Done()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		tg.mu.Lock()
		for _, c := range tg.conns {
			c.Close()
		}
		tg.mu.Unlock()
		tg.wg.Wait()
	})
	return tg
}

// echo sends back what it reads and closes at the end of stream.
func echo(c net.Conn) {
	io.Copy(c, c)
	c.Close()
}

// sendThenHold writes data and keeps the connection open until the peer
// closes it.
func sendThenHold(data []byte) func(net.Conn) {
	return func(c net.Conn) {
		c.Write(data)
		io.Copy(io.Discard, c)
	}
}

func startProxy(t *testing.T, tg *target, pl Plan) *Proxy {
	t.Helper()
	p, err := Start(tg.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p.SetPlan(pl)
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), hangBound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readFor reads from c until it has waited quiet for d, and returns what
// arrived and the error that ended the wait (a timeout when the peer was
// simply silent).
func readFor(c net.Conn, d time.Duration) ([]byte, error) {
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		c.SetReadDeadline(time.Now().Add(d))
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return got, err
		}
	}
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// hangBound bounds every wait for something that must happen (bytes that
// must arrive, a counter that must move). It only turns a hang into a
// failure; no test passes or fails by how fast the machine is.
const hangBound = 20 * time.Second

// quiet is how long a test listens to show that nothing arrives. Data
// that comes later than this would go unseen, but a correct proxy never
// fails for it: a loaded machine can only make silence last longer.
const quiet = 300 * time.Millisecond

// readN reads exactly n bytes from c, however slowly they come.
func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	c.SetReadDeadline(time.Now().Add(hangBound))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

// eventually waits until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hangBound); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
	}
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// TestPassThrough: with no fault every byte arrives, in order, both ways,
// and the counters say so.
func TestPassThrough(t *testing.T) {
	tg := startTarget(t, echo)
	p := startProxy(t, tg, Plan{})
	c := dial(t, p)
	want := payload(300 << 10)
	go c.Write(want)
	got := make([]byte, len(want))
	c.SetReadDeadline(time.Now().Add(hangBound))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("echoed bytes differ")
	}
	c.Close()
	waitClosed(t, p, 0)
	ci := p.Conns()[0]
	if ci.Stats.Up != int64(len(want)) || ci.Stats.Down != int64(len(want)) || ci.Stats.DroppedUp+ci.Stats.DroppedDown != 0 {
		t.Errorf("stats %+v, want %d each way and nothing dropped", ci.Stats, len(want))
	}
	if p.Accepted() != 1 || tg.accepted.Load() != 1 {
		t.Errorf("accepted %d/%d, want 1/1", p.Accepted(), tg.accepted.Load())
	}
}

func waitClosed(t *testing.T, p *Proxy, i int) {
	t.Helper()
	eventually(t, fmt.Sprintf("connection %d closed", i), func() bool {
		cs := p.Conns()
		return len(cs) > i && cs[i].Closed
	})
}

// TestStallDownAfterBytes: exactly N bytes reach the client, then nothing,
// while the connection stays open and the other direction still works.
func TestStallDownAfterBytes(t *testing.T) {
	var gotUp atomic.Int64
	tg := startTarget(t, func(c net.Conn) {
		c.Write(payload(1000))
		n, _ := io.Copy(io.Discard, c)
		gotUp.Store(n)
	})
	p := startProxy(t, tg, Plan{Faults: []Fault{StallAt(Down, Trigger{Down: 300})}})
	c := dial(t, p)
	if got := readN(t, c, 300); !bytes.Equal(got, payload(1000)[:300]) {
		t.Fatalf("the first 300 bytes differ")
	}
	if got, err := readFor(c, quiet); !isTimeout(err) || len(got) != 0 {
		t.Fatalf("%d more bytes then %v, want silence after 300", len(got), err)
	}
	if _, err := c.Write([]byte("still open")); err != nil {
		t.Fatalf("write after the stall: %v", err)
	}
	c.(*net.TCPConn).CloseWrite()
	eventually(t, "the target gets the 10 bytes sent up after the stall", func() bool { return gotUp.Load() == 10 })
	ci := p.Conns()[0]
	if len(ci.Fired) != 1 || ci.Fired[0].Stats.Down != 300 || !ci.FiredKind(Stall) {
		t.Errorf("fired %+v, want one stall at 300 bytes down", ci.Fired)
	}
	if last := ci.Trace[len(ci.Trace)-1]; last.Dir != Up || ci.Trace[0].Dir != Down || ci.Trace[0].N != 300 {
		t.Errorf("trace %+v, want 300 down then the 10 up", ci.Trace)
	}
}

// TestStallUpAfterBytes: the target receives exactly N bytes.
func TestStallUpAfterBytes(t *testing.T) {
	got := make(chan []byte, 1)
	tg := startTarget(t, func(c net.Conn) {
		b := make([]byte, 7)
		c.SetReadDeadline(time.Now().Add(hangBound))
		io.ReadFull(c, b)
		more, _ := readFor(c, quiet)
		got <- append(b, more...)
	})
	p := startProxy(t, tg, Plan{Faults: []Fault{StallAt(Up, Trigger{Up: 7})}})
	c := dial(t, p)
	if _, err := c.Write(payload(100)); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, payload(100)[:7]) {
		t.Fatalf("target got %q, want the first 7 bytes", b)
	}
	if s := p.Conns()[0].Stats; s.Up != 7 {
		t.Errorf("up counter %d, want 7", s.Up)
	}
}

// TestResetAfterBytes: after N bytes the client's read fails with
// ECONNRESET, not a clean end of stream, and so does the target's.
func TestResetAfterBytes(t *testing.T) {
	targetErr := make(chan error, 1)
	tg := startTarget(t, func(c net.Conn) {
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			targetErr <- err
			return
		}
		c.Write(payload(1000))
		_, err := io.Copy(io.Discard, c)
		targetErr <- err
	})
	p := startProxy(t, tg, Plan{Faults: []Fault{ResetAt(Trigger{Down: 100})}})
	c := dial(t, p)
	c.Write([]byte("go"))
	got, err := readFor(c, hangBound)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read ended with %v after %d bytes, want ECONNRESET", err, len(got))
	}
	if len(got) > 100 {
		t.Errorf("client got %d bytes, want at most 100", len(got))
	}
	select {
	case err := <-targetErr:
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("target's read ended with %v, want ECONNRESET", err)
		}
	case <-time.After(hangBound):
		t.Error("the target never noticed the reset")
	}
}

// TestResetAtOnce: a reset armed with the zero trigger fires before any
// byte moves.
func TestResetAtOnce(t *testing.T) {
	tg := startTarget(t, sendThenHold(payload(10)))
	p := startProxy(t, tg, Plan{Faults: []Fault{ResetAt(Trigger{})}})
	c, err := net.DialTimeout("tcp", p.Addr(), hangBound)
	if err != nil {
		// The reset can beat the end of connect(2) on loopback.
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dial: %v, want success or a reset", err)
		}
		return
	}
	defer c.Close()
	got, err := readFor(c, hangBound)
	if len(got) != 0 || !(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)) {
		t.Fatalf("got %d bytes then %v, want nothing and a reset", len(got), err)
	}
}

// TestBlackHoleAfterTime: once the time trigger has passed both
// directions vanish silently (counted as dropped) and the sockets stay
// open: the client sees neither data nor an end of stream. The fault
// fires no earlier than its time (a timer never fires early). Traffic
// before a time trigger flows: TestPendingTimeTriggerDoesNotHoldConnection.
func TestBlackHoleAfterTime(t *testing.T) {
	tg := startTarget(t, echo)
	p := startProxy(t, tg, Plan{Faults: []Fault{BlackHoleAt(Trigger{After: 200 * time.Millisecond})}})
	c := dial(t, p)
	eventually(t, "the black hole fires", func() bool { cs := p.Conns(); return len(cs) == 1 && len(cs[0].Fired) == 1 })
	c.Write([]byte("late"))
	eventually(t, "the 4 bytes sent are dropped", func() bool { return p.Conns()[0].Stats.DroppedUp == 4 })
	if got, err := readFor(c, quiet); len(got) != 0 || !isTimeout(err) {
		t.Fatalf("after the black hole: got %q, %v; want silence on an open socket", got, err)
	}
	ci := p.Conns()[0]
	if ci.Stats.Up != 0 || ci.Closed {
		t.Errorf("stats %+v closed %v, want nothing forwarded, still open", ci.Stats, ci.Closed)
	}
	if ci.Fired[0].Stats.Elapsed < 200*time.Millisecond {
		t.Errorf("fired %+v, before its 200ms", ci.Fired)
	}
}

// TestBlackHoleAfterBytes drops everything once the byte count is reached.
func TestBlackHoleAfterBytes(t *testing.T) {
	tg := startTarget(t, sendThenHold(payload(1000)))
	p := startProxy(t, tg, Plan{Faults: []Fault{BlackHoleAt(Trigger{Down: 10})}})
	c := dial(t, p)
	readN(t, c, 10)
	eventually(t, "the other 990 bytes dropped", func() bool { return p.Conns()[0].Stats.DroppedDown == 990 })
	if got, err := readFor(c, quiet); len(got) != 0 || !isTimeout(err) {
		t.Fatalf("got %d more bytes then %v, want silence after 10", len(got), err)
	}
}

// TestSilentAccept: the client connects and is answered by nothing; the
// target never sees a connection.
func TestSilentAccept(t *testing.T) {
	tg := startTarget(t, sendThenHold([]byte("SSH-2.0-x\r\n")))
	p := startProxy(t, tg, Plan{SilentAccept: true})
	c := dial(t, p)
	c.Write([]byte("hello"))
	got, err := readFor(c, quiet)
	if len(got) != 0 || !isTimeout(err) {
		t.Fatalf("got %q, %v; want silence", got, err)
	}
	if n := tg.accepted.Load(); n != 0 {
		t.Errorf("target accepted %d connections, want 0", n)
	}
	c.Close()
	waitClosed(t, p, 0)
	if s := p.Conns()[0].Stats; s.DroppedUp != 5 || s.Up != 0 {
		t.Errorf("stats %+v, want 5 bytes dropped up", s)
	}
}

// TestThrottle: 10 bytes at 20 B/s go in pieces of at most a tenth of a
// second's worth, 2 bytes, each followed by the time it is worth. Timed
// at the proxy from its own trace: every piece comes at least its
// predecessor's worth (100 ms for 2 bytes) after it, which only a
// timer firing early could break; the machine's load can only add.
func TestThrottle(t *testing.T) {
	tg := startTarget(t, sendThenHold(payload(10)))
	p := startProxy(t, tg, Plan{Faults: []Fault{ThrottleAt(Down, 20, Trigger{})}})
	c := dial(t, p)
	if got := readN(t, c, 10); !bytes.Equal(got, payload(10)) {
		t.Fatalf("got %q, want the 10 bytes", got)
	}
	// The proxy counts a piece just after it writes it.
	eventually(t, "the proxy counts 10 bytes down", func() bool { return p.Conns()[0].Stats.Down == 10 })
	trace := p.Conns()[0].Trace
	if len(trace) < 5 {
		t.Fatalf("trace %+v, want the 10 bytes in pieces of at most 2", trace)
	}
	for i, ch := range trace {
		if ch.N > 2 {
			t.Errorf("chunk of %d bytes, want at most 2 at 20 B/s", ch.N)
		}
		if i > 0 {
			worth := time.Duration(trace[i-1].N) * time.Second / 20
			if gap := ch.At - trace[i-1].At; gap < worth {
				t.Errorf("chunk %d came %v after the one before, want at least %v", i, gap, worth)
			}
		}
	}
}

// TestDelay adds latency per chunk in each direction.
func TestDelay(t *testing.T) {
	tg := startTarget(t, echo)
	p := startProxy(t, tg, Plan{Faults: []Fault{DelayAt(Both, 100*time.Millisecond, Trigger{})}})
	c := dial(t, p)
	start := time.Now()
	c.Write([]byte("x"))
	c.SetReadDeadline(time.Now().Add(hangBound))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 200*time.Millisecond {
		t.Errorf("round trip %v, want at least 200ms", rtt)
	}
}

// TestCrossDirectionTrigger stalls the replies once the client has sent N
// bytes: the trigger counts one direction, the fault hits the other.
func TestCrossDirectionTrigger(t *testing.T) {
	tg := startTarget(t, echo)
	p := startProxy(t, tg, Plan{Faults: []Fault{StallAt(Down, Trigger{Up: 5})}})
	c := dial(t, p)
	c.Write([]byte("abcd"))
	if got := readN(t, c, 4); string(got) != "abcd" {
		t.Fatalf("before the trigger: got %q", got)
	}
	c.Write([]byte("e"))
	if got, err := readFor(c, quiet); len(got) != 0 || !isTimeout(err) {
		t.Fatalf("after the trigger: got %q, %v; want silence", got, err)
	}
}

// TestWhenTrigger fires on an outside event the predicate observes.
func TestWhenTrigger(t *testing.T) {
	tg := startTarget(t, echo)
	var armed atomic.Bool
	p := startProxy(t, tg, Plan{Faults: []Fault{ResetAt(Trigger{When: func(Stats) bool { return armed.Load() }})}})
	c := dial(t, p)
	c.Write([]byte("one"))
	if got := readN(t, c, 3); string(got) != "one" {
		t.Fatalf("before: got %q", got)
	}
	armed.Store(true)
	c.Write([]byte("two"))
	_, err := readFor(c, hangBound)
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Fatalf("after arming: %v, want the connection reset", err)
	}
	if ci := p.Conns()[0]; !ci.FiredKind(Reset) || ci.Stats.Up != 3 {
		t.Errorf("conn %+v, want a reset after 3 bytes up", ci)
	}
}

// TestPlanPerConnection gives each connection its own plan by index.
func TestPlanPerConnection(t *testing.T) {
	tg := startTarget(t, echo)
	p := startProxy(t, tg, Plan{})
	p.SetPlanFunc(func(i int) Plan {
		if i == 0 {
			return Plan{SilentAccept: true}
		}
		return Plan{}
	})
	c0 := dial(t, p)
	c0.Write([]byte("0"))
	if got, err := readFor(c0, quiet); len(got) != 0 || !isTimeout(err) {
		t.Fatalf("first connection: got %q, %v; want silence", got, err)
	}
	c1 := dial(t, p)
	c1.Write([]byte("1"))
	if got := readN(t, c1, 1); string(got) != "1" {
		t.Fatalf("second connection: got %q, want the echo", got)
	}
	if tg.accepted.Load() != 1 || p.Accepted() != 2 {
		t.Errorf("target accepted %d, proxy %d; want 1 and 2", tg.accepted.Load(), p.Accepted())
	}
}

// TestCloseUnblocksEverything: Close returns promptly with stalled and
// black-holed connections open, and their clients see the sockets close.
func TestCloseUnblocksEverything(t *testing.T) {
	tg := startTarget(t, echo)
	p, err := Start(tg.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p.SetPlanFunc(func(i int) Plan {
		switch i {
		case 0:
			return Plan{Faults: []Fault{StallAt(Both, Trigger{})}}
		case 1:
			return Plan{Faults: []Fault{BlackHoleAt(Trigger{})}}
		case 2:
			return Plan{SilentAccept: true}
		}
		return Plan{Faults: []Fault{ThrottleAt(Both, 1, Trigger{})}}
	})
	var cs []net.Conn
	for range 4 {
		c := dial(t, p)
		c.Write(payload(100))
		cs = append(cs, c)
	}
	// Every connection is in its fault: each has read what was sent
	// (held, dropped or trickling out).
	eventually(t, "four connections in their faults", func() bool {
		cs := p.Conns()
		if len(cs) != 4 {
			return false
		}
		for _, ci := range cs[1:3] {
			if ci.Stats.DroppedUp != 100 {
				return false
			}
		}
		return cs[3].Stats.Up > 0
	})
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(hangBound):
		t.Fatal("Close did not return")
	}
	for i, c := range cs {
		if _, err := readFor(c, hangBound); isTimeout(err) {
			t.Errorf("connection %d still open after Close", i)
		}
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("the proxy still accepts after Close")
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestTargetDown: a refused upstream closes the client's connection and
// records why.
func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p, err := Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p)
	if _, err := readFor(c, hangBound); isTimeout(err) {
		t.Fatal("client left hanging when the target is down")
	}
	waitClosed(t, p, 0)
	if ci := p.Conns()[0]; ci.Err == "" {
		t.Error("no error recorded for the refused target")
	}
}

// TestPendingTimeTriggerDoesNotHoldConnection: a connection whose ends
// both close is torn down at once, even with a time trigger still far off.
func TestPendingTimeTriggerDoesNotHoldConnection(t *testing.T) {
	tg := startTarget(t, echo)
	p := startProxy(t, tg, Plan{Faults: []Fault{BlackHoleAt(Trigger{After: time.Hour})}})
	c := dial(t, p)
	c.Write([]byte("x"))
	if got := readN(t, c, 1); string(got) != "x" {
		t.Fatalf("got %q, want the echo", got)
	}
	c.Close()
	waitClosed(t, p, 0)
	if ci := p.Conns()[0]; len(ci.Fired) != 0 {
		t.Errorf("fired %+v, want nothing", ci.Fired)
	}
}

// TestHead: the first HeadSize bytes of each direction are kept exactly,
// however they were split into writes and reads, and no more.
func TestHead(t *testing.T) {
	down := payload(HeadSize + 5000)
	tg := startTarget(t, func(c net.Conn) {
		// Two writes that a read may or may not join.
		c.Write(down[:40])
		c.Write(down[40:])
		io.Copy(io.Discard, c)
		c.Close()
	})
	p := startProxy(t, tg, Plan{})
	c := dial(t, p)
	c.Write([]byte("up-1"))
	c.Write([]byte("up-2"))
	got := make([]byte, len(down))
	c.SetReadDeadline(time.Now().Add(hangBound))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitClosed(t, p, 0)
	ci := p.Conns()[0]
	if !bytes.Equal(ci.DownHead, down[:HeadSize]) {
		t.Errorf("down head: %d bytes, want the first %d forwarded", len(ci.DownHead), HeadSize)
	}
	if string(ci.UpHead) != "up-1up-2" {
		t.Errorf("up head %q, want %q", ci.UpHead, "up-1up-2")
	}
}
