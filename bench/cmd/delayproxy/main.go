// Command delayproxy is the benchmark's latency emulator: a TCP proxy that
// adds a fixed one-way delay to every chunk in each direction (preserving
// order, without limiting bandwidth) and counts round trips.
//
// This kernel has no netem, so latency is added in user space. A client's
// connect to the proxy completes locally at once; to charge the TCP
// handshake as a real link would, the proxy dials the upstream server only
// 1.5 RTT after accepting, so the server sees the connection when it would
// have (SYN, SYN-ACK, ACK) and the first server byte reaches the client 2 RTT
// after the connect began — what it takes on a real link. Data the client
// writes in the meantime is delivered no earlier than the upstream dial.
//
// Round trips are approximated by counting direction changes in the order
// the proxy reads chunks: each client→server burst that is followed by a
// server→client burst counts one. A strictly sequential client doing N
// request/reply exchanges shows N; a pipelining client shows fewer.
//
// Usage:
//
//	delayproxy -rtt 100ms -stats stats.jsonl -map h1=127.0.0.1:22001=10.77.1.2:22 [-map ...]
//	delayproxy probe -n 9 127.0.0.1:22001     # median time to the server's first byte
//
// Each closed connection appends one JSON line to -stats: host, start, end,
// bytes each way, chunks each way, round trips.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type mapping struct{ name, listen, target string }

type mapFlag []mapping

func (m *mapFlag) String() string { return fmt.Sprint(*m) }
func (m *mapFlag) Set(s string) error {
	parts := strings.SplitN(s, "=", 3)
	if len(parts) != 3 {
		return fmt.Errorf("want NAME=LISTEN=TARGET, got %q", s)
	}
	*m = append(*m, mapping{parts[0], parts[1], parts[2]})
	return nil
}

// connStats is what one connection reports when it closes.
type connStats struct {
	Host       string    `json:"host"`
	Conn       int64     `json:"conn"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	BytesUp    int64     `json:"bytes_c2s"`
	BytesDown  int64     `json:"bytes_s2c"`
	ChunksUp   int64     `json:"chunks_c2s"`
	ChunksDown int64     `json:"chunks_s2c"`
	RoundTrips int64     `json:"round_trips"`
}

var (
	statsMu  sync.Mutex
	statsOut io.Writer = io.Discard
	connSeq  atomic.Int64
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "probe" {
		probe(os.Args[2:])
		return
	}
	var maps mapFlag
	rtt := flag.Duration("rtt", 0, "round-trip time to add (RTT/2 each direction)")
	statsPath := flag.String("stats", "", "append one JSON line per closed connection to this file")
	flag.Var(&maps, "map", "NAME=LISTEN=TARGET (repeatable)")
	flag.Parse()
	if len(maps) == 0 {
		log.Fatal("no -map given")
	}
	if *statsPath != "" {
		f, err := os.OpenFile(*statsPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		statsOut = f
	}
	for _, m := range maps {
		ln, err := net.Listen("tcp", m.listen)
		if err != nil {
			log.Fatal(err)
		}
		go serve(ln, m, *rtt)
	}
	log.Printf("delayproxy: %d listeners, rtt %s", len(maps), *rtt)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

func serve(ln net.Listener, m mapping, rtt time.Duration) {
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Printf("%s: accept: %v", m.name, err)
			return
		}
		go handle(c, m, rtt)
	}
}

// chunk is data read at a time, due for writing at another.
type chunk struct {
	due  time.Time
	data []byte
}

// counter tracks the order in which the proxy sees chunks, for round trips.
type counter struct {
	mu    sync.Mutex
	last  int // 0 none, 1 up (client→server), 2 down
	turns int64
}

func (c *counter) see(dir int) {
	c.mu.Lock()
	if dir == 2 && c.last == 1 {
		c.turns++
	}
	c.last = dir
	c.mu.Unlock()
}

func handle(client net.Conn, m mapping, rtt time.Duration) {
	st := connStats{Host: m.name, Conn: connSeq.Add(1), Start: time.Now()}
	half := rtt / 2
	var cnt counter
	// The upstream connection comes 1.5 RTT after the accept: the handshake
	// a real link would have charged before the server saw the client.
	upReady := make(chan net.Conn, 1)
	upFailed := make(chan struct{})
	go func() {
		time.Sleep(rtt + half)
		s, err := net.Dial("tcp", m.target)
		if err != nil {
			log.Printf("%s: dial %s: %v", m.name, m.target, err)
			close(upFailed)
			client.Close()
			return
		}
		upReady <- s
	}()

	upQ := make(chan chunk, 4096)
	downQ := make(chan chunk, 4096)
	var wg sync.WaitGroup
	var server net.Conn
	serverSet := make(chan struct{})

	// client → queue
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(upQ)
		for {
			buf := make([]byte, 32<<10)
			n, err := client.Read(buf)
			if n > 0 {
				cnt.see(1)
				st.ChunksUp++
				st.BytesUp += int64(n)
				upQ <- chunk{time.Now().Add(half), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	// queue → server (waits for the upstream connection)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case s := <-upReady:
			server = s
			close(serverSet)
		case <-upFailed:
			for range upQ {
			}
			return
		}
		drain(upQ, server)
		if tc, ok := server.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	// server → queue → client
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-serverSet:
		case <-upFailed:
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			drain(downQ, client)
			if tc, ok := client.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
		}()
		defer close(downQ)
		for {
			buf := make([]byte, 32<<10)
			n, err := server.Read(buf)
			if n > 0 {
				cnt.see(2)
				st.ChunksDown++
				st.BytesDown += int64(n)
				downQ <- chunk{time.Now().Add(half), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	wg.Wait()
	client.Close()
	if server != nil {
		server.Close()
	}
	st.End = time.Now()
	st.RoundTrips = cnt.turns
	line, _ := json.Marshal(st)
	statsMu.Lock()
	statsOut.Write(append(line, '\n'))
	statsMu.Unlock()
}

// drain writes each chunk when it is due, in order. After a write error it
// keeps reading the queue so the reader never blocks.
func drain(q <-chan chunk, w net.Conn) {
	broken := false
	for c := range q {
		if broken {
			continue
		}
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := w.Write(c.data); err != nil {
			broken = true
			w.Close()
		}
	}
}

// probe measures, n times, the time from starting a TCP connect to the
// first byte the server sends (an SSH server sends its banner at once): on a
// real link that is 2 RTT (handshake, then the banner), so RTT ≈ median/2.
func probe(args []string) {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	n := fs.Int("n", 9, "samples")
	fs.Parse(args)
	if fs.NArg() != 1 {
		log.Fatal("usage: delayproxy probe [-n N] HOST:PORT")
	}
	addr := fs.Arg(0)
	var connect, first []time.Duration
	for i := 0; i < *n; i++ {
		t0 := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			log.Fatal(err)
		}
		t1 := time.Now()
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil {
			log.Fatal(err)
		}
		t2 := time.Now()
		c.Close()
		connect = append(connect, t1.Sub(t0))
		first = append(first, t2.Sub(t0))
	}
	med := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	fmt.Printf("connect_ms=%.2f first_byte_ms=%.2f rtt_est_ms=%.2f\n",
		ms(med(connect)), ms(med(first)), ms(med(first))/2)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
