package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// Dir is a direction of traffic through the proxy, or both.
type Dir uint8

const (
	// Up is client to target.
	Up Dir = 1 << iota
	// Down is target to client.
	Down
	// Both is Up and Down.
	Both = Up | Down
)

func (d Dir) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Dir(%d)", uint8(d))
}

// Kind is what a fault does once it fires.
type Kind uint8

const (
	// Delay waits Fault.Latency before forwarding each chunk in Fault.Dir.
	Delay Kind = iota + 1
	// Throttle forwards at most Fault.Rate bytes per second in Fault.Dir
	// (Rate 1 sends one byte a second).
	Throttle
	// Stall stops reading and forwarding Fault.Dir: what the sender writes
	// waits in socket buffers; the connection stays open.
	Stall
	// BlackHole reads and silently discards Fault.Dir (Both by default),
	// end-of-stream included; the sockets stay open.
	BlackHole
	// Reset closes both sockets at once with an RST (SO_LINGER 0), so the
	// client's next read or write fails with "connection reset by peer".
	Reset
)

func (k Kind) String() string {
	switch k {
	case Delay:
		return "delay"
	case Throttle:
		return "throttle"
	case Stall:
		return "stall"
	case BlackHole:
		return "black-hole"
	case Reset:
		return "reset"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Trigger says when a fault fires: once every condition that is set holds.
// The zero Trigger fires at once, before the first byte.
type Trigger struct {
	// Up and Down fire once at least that many bytes have been forwarded
	// in that direction. The proxy splits reads at these counts, so a
	// fault on the same direction applies from exactly the next byte.
	Up, Down int64
	// After fires once this long has passed since the connection was
	// accepted, even if no byte moves.
	After time.Duration
	// When is asked before each chunk is forwarded in either direction
	// (and when After passes); the fault fires the first time it returns
	// true. It runs on the proxy's goroutines, one call at a time per
	// connection, and must not call the Proxy's methods.
	When func(Stats) bool
}

func (t Trigger) String() string {
	var parts []string
	if t.Up > 0 {
		parts = append(parts, fmt.Sprintf("up>=%d", t.Up))
	}
	if t.Down > 0 {
		parts = append(parts, fmt.Sprintf("down>=%d", t.Down))
	}
	if t.After > 0 {
		parts = append(parts, fmt.Sprintf("after %v", t.After))
	}
	if t.When != nil {
		parts = append(parts, "when(...)")
	}
	if len(parts) == 0 {
		return "at once"
	}
	return strings.Join(parts, " and ")
}

// Fault is one programmed fault of a connection.
type Fault struct {
	Kind Kind
	// Dir is the traffic Delay, Throttle, Stall and BlackHole affect;
	// zero means Both. Reset ignores it.
	Dir Dir
	At  Trigger
	// Latency is Delay's wait per chunk.
	Latency time.Duration
	// Rate is Throttle's bytes per second (at least 1).
	Rate int
}

func (f Fault) String() string {
	s := f.Kind.String()
	switch f.Kind {
	case Delay:
		s += fmt.Sprintf(" %v", f.Latency)
	case Throttle:
		s += fmt.Sprintf(" %d B/s", f.Rate)
	}
	if f.Kind != Reset {
		s += " " + f.dir().String()
	}
	return s + " " + f.At.String()
}

func (f Fault) dir() Dir {
	if f.Dir == 0 {
		return Both
	}
	return f.Dir
}

// StallAt stops d's traffic at t.
func StallAt(d Dir, t Trigger) Fault { return Fault{Kind: Stall, Dir: d, At: t} }

// BlackHoleAt silently drops both directions at t.
func BlackHoleAt(t Trigger) Fault { return Fault{Kind: BlackHole, Dir: Both, At: t} }

// ResetAt resets the connection at t.
func ResetAt(t Trigger) Fault { return Fault{Kind: Reset, At: t} }

// ThrottleAt limits d to rate bytes per second from t on.
func ThrottleAt(d Dir, rate int, t Trigger) Fault {
	return Fault{Kind: Throttle, Dir: d, Rate: rate, At: t}
}

// DelayAt adds latency before each chunk in d from t on.
func DelayAt(d Dir, latency time.Duration, t Trigger) Fault {
	return Fault{Kind: Delay, Dir: d, Latency: latency, At: t}
}

// Plan is what happens to one connection.
type Plan struct {
	// SilentAccept accepts the connection and never dials the target:
	// the client is answered by nothing, and what it sends is discarded.
	SilentAccept bool
	Faults       []Fault
}

// Stats are one connection's counters.
type Stats struct {
	Up, Down               int64 // bytes forwarded
	DroppedUp, DroppedDown int64 // bytes read and discarded
	Elapsed                time.Duration
}

// Fired records a fault firing: which, and the connection's counters at
// that moment (Stats.Elapsed is the time since the connection was
// accepted).
type Fired struct {
	Fault int // index in Plan.Faults
	What  string
	Stats Stats
}

// Chunk is one forwarded piece of data, with the counters after it.
type Chunk struct {
	Dir      Dir
	N        int
	At       time.Duration
	Up, Down int64
}

// maxTrace bounds each connection's recorded chunks.
const maxTrace = 8192

// HeadSize is how many of the first bytes forwarded in each direction a
// connection keeps (ConnInfo.UpHead, ConnInfo.DownHead): enough for a test
// to parse a protocol's clear-text opening, such as SSH's version banners
// and key exchange, from the bytes themselves rather than from how they
// happened to be split into reads.
const HeadSize = 16 << 10

// ConnInfo is a snapshot of one connection.
type ConnInfo struct {
	Index    int // 0 for the first connection accepted
	Accepted time.Time
	Stats    Stats
	Fired    []Fired
	Trace    []Chunk // the first chunks forwarded, in order
	// UpHead and DownHead are the first bytes forwarded up and down, at
	// most HeadSize each, whatever chunks they came in: the first
	// min(ch.Down, HeadSize) bytes of DownHead reached the client by the
	// end of chunk ch.
	UpHead, DownHead []byte
	Closed           bool
	Err              string // why the target could not be reached, if it could not
}

// FiredKind reports whether a fault of kind k fired on this connection.
func (c ConnInfo) FiredKind(k Kind) bool {
	for _, f := range c.Fired {
		if strings.HasPrefix(f.What, k.String()) {
			return true
		}
	}
	return false
}

// DialTimeout bounds the proxy's connection to the target.
const DialTimeout = 5 * time.Second

// Proxy is a running proxy. Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	plan   func(i int) Plan
	conns  []*conn
	closed bool
}

// Start listens on 127.0.0.1:0 and forwards every connection to target
// (host:port) with no fault until SetPlan says otherwise.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{target: target, ln: ln, plan: func(int) Plan { return Plan{} }}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the listening port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// SetPlan applies pl to every connection accepted from now on.
func (p *Proxy) SetPlan(pl Plan) { p.SetPlanFunc(func(int) Plan { return pl }) }

// SetPlanFunc chooses each later connection's plan by its index (0 for
// the first connection the proxy ever accepted). f runs with the proxy's
// lock held and must not call the Proxy's methods.
func (p *Proxy) SetPlanFunc(f func(i int) Plan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan = f
}

// Accepted is how many connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Conns returns a snapshot of every connection accepted so far.
func (p *Proxy) Conns() []ConnInfo {
	p.mu.Lock()
	cs := append([]*conn(nil), p.conns...)
	p.mu.Unlock()
	out := make([]ConnInfo, len(cs))
	for i, c := range cs {
		out[i] = c.info()
	}
	return out
}

// Totals sums the counters of every connection.
func (p *Proxy) Totals() Stats {
	var s Stats
	for _, c := range p.Conns() {
		s.Up += c.Stats.Up
		s.Down += c.Stats.Down
		s.DroppedUp += c.Stats.DroppedUp
		s.DroppedDown += c.Stats.DroppedDown
	}
	return s
}

// Close stops the proxy: no more connections are accepted, every open one
// is closed, and Close returns once all the proxy's goroutines are done.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	cs := append([]*conn(nil), p.conns...)
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range cs {
		c.teardown()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			nc.Close()
			return
		}
		c := &conn{idx: len(p.conns), plan: p.plan(len(p.conns)), start: time.Now(), client: nc, done: make(chan struct{})}
		c.fired = make([]bool, len(c.plan.Faults))
		p.conns = append(p.conns, c)
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			c.serve(p.target)
		}()
	}
}

// conn is one proxied connection.
type conn struct {
	idx    int
	plan   Plan
	start  time.Time
	client net.Conn
	done   chan struct{} // closed by teardown

	evalMu sync.Mutex // one trigger evaluation at a time

	mu       sync.Mutex
	upstream net.Conn
	st       Stats
	fired    []bool
	firedLog []Fired
	trace    []Chunk
	upHead   []byte
	downHead []byte
	closed   bool
	err      string
}

func (c *conn) info() ConnInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.Elapsed = time.Since(c.start)
	return ConnInfo{
		Index: c.idx, Accepted: c.start, Stats: st, Closed: c.closed, Err: c.err,
		Fired:    append([]Fired(nil), c.firedLog...),
		Trace:    append([]Chunk(nil), c.trace...),
		UpHead:   append([]byte(nil), c.upHead...),
		DownHead: append([]byte(nil), c.downHead...),
	}
}

// teardown closes both sockets once; it unblocks every pump.
func (c *conn) teardown() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.done)
	up := c.upstream
	c.mu.Unlock()
	c.client.Close()
	if up != nil {
		up.Close()
	}
}

// reset closes both sockets with an RST.
func (c *conn) reset() {
	c.mu.Lock()
	up := c.upstream
	c.mu.Unlock()
	for _, nc := range []net.Conn{c.client, up} {
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
	}
	c.teardown()
}

func (c *conn) serve(target string) {
	if c.plan.SilentAccept {
		// Hold the socket, answer nothing, and drop what arrives until
		// the client goes away.
		c.pump(Up, c.client, nil)
		c.teardown()
		return
	}
	up, err := net.DialTimeout("tcp", target, DialTimeout)
	if err != nil {
		c.mu.Lock()
		c.err = err.Error()
		c.mu.Unlock()
		c.teardown()
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		up.Close()
		return
	}
	c.upstream = up
	c.mu.Unlock()
	// A fault armed "at once" (a reset, say) fires before any byte moves.
	if c.evaluate().reset {
		c.reset()
		return
	}

	var alarms, pumps sync.WaitGroup
	for _, f := range c.plan.Faults {
		if f.At.After > 0 {
			// A time trigger fires even when no byte moves.
			alarms.Add(1)
			go func() {
				defer alarms.Done()
				c.alarm(f.At.After)
			}()
		}
	}
	pumps.Add(2)
	go func() { defer pumps.Done(); c.pump(Up, c.client, up) }()
	go func() { defer pumps.Done(); c.pump(Down, up, c.client) }()
	pumps.Wait()
	c.teardown() // also ends the alarms still waiting
	alarms.Wait()
}

// alarm evaluates the triggers once the connection is d old, unless it
// is torn down first.
func (c *conn) alarm(d time.Duration) {
	if !c.sleep(d - time.Since(c.start)) {
		return
	}
	if c.evaluate().reset {
		c.reset()
	}
}

// effects is what the faults in force do to one direction.
type effects struct {
	reset, stall, drop bool
	latency            time.Duration
	rate               int
}

// evaluate fires every fault whose trigger now holds and returns what the
// faults in force do (for d, when d is Up or Down; reset is always set
// when a Reset fault is in force).
func (c *conn) evaluate() effects { return c.evaluateFor(0) }

func (c *conn) evaluateFor(d Dir) effects {
	c.evalMu.Lock()
	defer c.evalMu.Unlock()
	c.mu.Lock()
	st := c.st
	st.Elapsed = time.Since(c.start)
	pending := false
	for i := range c.plan.Faults {
		if !c.fired[i] {
			pending = true
		}
	}
	c.mu.Unlock()
	if pending {
		for i, f := range c.plan.Faults {
			c.mu.Lock()
			already := c.fired[i]
			c.mu.Unlock()
			if already || !holds(f.At, st) {
				continue
			}
			c.mu.Lock()
			c.fired[i] = true
			c.firedLog = append(c.firedLog, Fired{Fault: i, What: f.String(), Stats: st})
			c.mu.Unlock()
		}
	}
	var e effects
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, f := range c.plan.Faults {
		if !c.fired[i] {
			continue
		}
		if f.Kind == Reset {
			e.reset = true
			continue
		}
		if d == 0 || f.dir()&d == 0 {
			continue
		}
		switch f.Kind {
		case Delay:
			e.latency += f.Latency
		case Throttle:
			r := max(f.Rate, 1)
			if e.rate == 0 || r < e.rate {
				e.rate = r
			}
		case Stall:
			e.stall = true
		case BlackHole:
			e.drop = true
		}
	}
	return e
}

func holds(t Trigger, st Stats) bool {
	if t.Up > 0 && st.Up < t.Up {
		return false
	}
	if t.Down > 0 && st.Down < t.Down {
		return false
	}
	if t.After > 0 && st.Elapsed < t.After {
		return false
	}
	if t.When != nil && !t.When(st) {
		return false
	}
	return true
}

// room is how many of n bytes may go in d before the next byte threshold
// of a fault that has not fired yet.
func (c *conn) room(d Dir, n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, f := range c.plan.Faults {
		if c.fired[i] {
			continue
		}
		var left int64
		switch d {
		case Up:
			left = f.At.Up - c.st.Up
		case Down:
			left = f.At.Down - c.st.Down
		}
		if left > 0 && left < int64(n) {
			n = int(left)
		}
	}
	return n
}

// count records p as forwarded in d, or as read and discarded.
func (c *conn) count(d Dir, p []byte, dropped bool) {
	n := len(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case d == Up && dropped:
		c.st.DroppedUp += int64(n)
	case d == Down && dropped:
		c.st.DroppedDown += int64(n)
	case d == Up:
		c.st.Up += int64(n)
	default:
		c.st.Down += int64(n)
	}
	if dropped {
		return
	}
	if len(c.trace) < maxTrace {
		c.trace = append(c.trace, Chunk{Dir: d, N: n, At: time.Since(c.start), Up: c.st.Up, Down: c.st.Down})
	}
	head := &c.downHead
	if d == Up {
		head = &c.upHead
	}
	if keep := HeadSize - len(*head); keep > 0 {
		*head = append(*head, p[:min(keep, n)]...)
	}
}

// sleep waits d or until the connection is torn down; it reports whether
// the connection is still up.
func (c *conn) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

// pump copies src to dst (dst nil: discard) under the plan's faults.
func (c *conn) pump(d Dir, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			e := c.evaluateFor(d)
			switch {
			case e.reset:
				c.reset()
				return
			case e.stall:
				// Hold what was read, read no more, keep the sockets.
				<-c.done
				return
			case e.drop || dst == nil:
				c.count(d, data, true)
				data = nil
				continue
			}
			piece := c.room(d, len(data))
			if e.rate > 0 {
				piece = min(piece, max(1, e.rate/10))
			}
			if !c.sleep(e.latency) {
				return
			}
			// Counted before it is written: the peer may answer it at
			// once, and a fault triggered by these bytes (in either
			// direction) must see them counted before the answer comes
			// back through the other pump. A write that fails tears the
			// connection down, with these bytes counted.
			c.count(d, data[:piece], false)
			if _, err := dst.Write(data[:piece]); err != nil {
				c.teardown()
				return
			}
			data = data[piece:]
			if e.rate > 0 && !c.sleep(time.Duration(piece)*time.Second/time.Duration(e.rate)) {
				return
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) || dst == nil {
				c.teardown()
				return
			}
			// Pass the end of stream on, unless this direction is
			// stalled or dropped by now: then the peer never hears of it.
			e := c.evaluateFor(d)
			switch {
			case e.reset:
				c.reset()
			case e.stall || e.drop:
			default:
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
				} else {
					c.teardown()
				}
			}
			return
		}
	}
}
