// Command nfqdelay is the real-TCP benchmark's delay: it holds every packet
// that enters a benchmark host's network namespace for a fixed time, then
// lets it through. The packets travel the kernel's own TCP, so the
// handshake, slow start, windows and acknowledgements all see the round
// trip, as on a real link (this kernel has no netem).
//
// In each namespace named with -ns, bench/run.sh (DELAY=nfq) adds
//
//	iptables -t mangle -A PREROUTING -i eth0 -j NFQUEUE --queue-num 0
//
// and nfqdelay binds queue 0 there over netlink. It takes each packet's id
// (metadata only, no payload is copied) and accepts it once -delay has
// passed since it arrived. Packets leaving a namespace are not held, so the
// whole round trip is spent one way: -delay is the RTT.
//
// The delay is the same for every packet, so packets come due in the order
// they arrived, and one batch verdict accepts every packet due at once.
//
// Usage:
//
//	nfqdelay -delay 100ms -ns hb1 -ns hb2 [-stats FILE]
//
// It prints "ready" on stdout once every queue is bound, and on SIGTERM or
// SIGINT writes one JSON line per namespace to -stats (packets held, the
// most held at once, receive errors) and exits.
package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Netfilter queue constants (linux/netfilter/nfnetlink_queue.h).
const (
	nfnlSubsysQueue  = 3
	nfqnlMsgPacket   = 0
	nfqnlMsgConfig   = 2
	nfqnlMsgVerdictB = 3

	nfqaPacketHdr  = 1
	nfqaVerdictHdr = 2

	nfqaCfgCmd      = 1
	nfqaCfgParams   = 2
	nfqaCfgQueueMax = 3
	nfqaCfgMask     = 4
	nfqaCfgFlags    = 5

	nfqnlCfgCmdBind = 1
	nfqnlCopyMeta   = 1
	nfqaCfgFGSO     = 1 << 2

	nfAccept = 1
)

type nsFlag []string

func (n *nsFlag) String() string     { return strings.Join(*n, ",") }
func (n *nsFlag) Set(s string) error { *n = append(*n, s); return nil }

// queue is one namespace's NFQUEUE 0 and the packets it holds.
type queue struct {
	ns    string
	fd    int
	file  *os.File
	delay time.Duration

	mu      sync.Mutex
	held    []heldPacket // in arrival order, so in due order
	wake    chan struct{}
	packets int64
	maxHeld int
	errs    int64
}

type heldPacket struct {
	id  uint32
	due time.Time
}

type queueStats struct {
	NS      string `json:"ns"`
	Packets int64  `json:"packets"`
	MaxHeld int    `json:"max_held"`
	Errors  int64  `json:"recv_errors"`
}

func main() {
	var names nsFlag
	delay := flag.Duration("delay", 100*time.Millisecond, "how long each entering packet is held (the round trip)")
	statsPath := flag.String("stats", "", "write one JSON line per namespace here on exit")
	flag.Var(&names, "ns", "network namespace name under /run/netns (repeatable)")
	flag.Parse()
	if len(names) == 0 {
		log.Fatal("nfqdelay: no -ns given")
	}
	var queues []*queue
	for _, ns := range names {
		q, err := open(ns, *delay)
		if err != nil {
			log.Fatalf("nfqdelay: %s: %v", ns, err)
		}
		queues = append(queues, q)
	}
	for _, q := range queues {
		go q.receive()
		go q.release()
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	if *statsPath != "" {
		f, err := os.OpenFile(*statsPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		enc := json.NewEncoder(f)
		for _, q := range queues {
			q.mu.Lock()
			st := queueStats{q.ns, q.packets, q.maxHeld, q.errs}
			q.mu.Unlock()
			if err := enc.Encode(st); err != nil {
				log.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			log.Fatal(err)
		}
	}
}

// open binds queue 0 in namespace ns. The socket is made inside the
// namespace (on a thread switched into it and back) and stays there.
func open(ns string, delay time.Duration) (*queue, error) {
	fd, err := socketIn(ns)
	if err != nil {
		return nil, err
	}
	q := &queue{ns: ns, fd: fd, delay: delay, wake: make(chan struct{}, 1)}
	// A large receive buffer: at 100 ms a busy host has thousands of
	// packets in flight, and a full buffer loses their ids.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	if err := q.config(attr(nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, 0})); err != nil {
		return nil, fmt.Errorf("bind queue 0: %w", err)
	}
	params := make([]byte, 5)
	params[4] = nfqnlCopyMeta // copy_range 0: no payload
	maxLen := binary.BigEndian.AppendUint32(nil, 1<<16)
	gso := binary.BigEndian.AppendUint32(nil, nfqaCfgFGSO)
	if err := q.config(append(append(attr(nfqaCfgParams, params), attr(nfqaCfgQueueMax, maxLen)...),
		append(attr(nfqaCfgMask, gso), attr(nfqaCfgFlags, gso)...)...)); err != nil {
		return nil, fmt.Errorf("configure queue 0: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	q.file = os.NewFile(uintptr(fd), "nfqueue-"+ns)
	return q, nil
}

func socketIn(ns string) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(self)
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return -1, err
	}
	fd, serr := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
		// This thread is in the wrong namespace: keep it locked so it ends
		// with the goroutine.
		runtime.LockOSThread()
		return -1, fmt.Errorf("back to own namespace: %w", err)
	}
	if serr != nil {
		return -1, serr
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// attr encodes one netlink attribute, padded to 4 bytes.
func attr(typ uint16, payload []byte) []byte {
	n := 4 + len(payload)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(n))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], payload)
	return b
}

// message encodes a netfilter queue message for queue 0.
func message(msgType, flags uint16, attrs []byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+4, unix.NLMSG_HDRLEN+4+len(attrs))
	b = append(b, attrs...)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|msgType)
	binary.NativeEndian.PutUint16(b[6:], flags)
	b[16] = unix.AF_UNSPEC // nfgenmsg: family, version 0, res_id 0 (queue 0)
	return b
}

// config sends one configuration message and waits for its acknowledgement
// (the socket is still blocking).
func (q *queue) config(attrs []byte) error {
	msg := message(nfqnlMsgConfig, unix.NLM_F_REQUEST|unix.NLM_F_ACK, attrs)
	if err := unix.Sendto(q.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(q.fd, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
				return syscall.Errno(-e)
			}
			return nil
		}
	}
	return errors.New("no acknowledgement")
}

// receive reads packet notices and holds each one's id until it is due.
func (q *queue) receive() {
	rc, err := q.file.SyscallConn()
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, 0)
			return rerr != unix.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		now := time.Now()
		if err != nil {
			// ENOBUFS: the kernel dropped notices; those packets stay
			// queued until a later batch verdict accepts them.
			q.mu.Lock()
			q.errs++
			q.mu.Unlock()
			if errors.Is(err, unix.ENOBUFS) {
				continue
			}
			log.Fatalf("nfqdelay: %s: receive: %v", q.ns, err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			log.Printf("nfqdelay: %s: %v", q.ns, err)
			continue
		}
		q.mu.Lock()
		for _, m := range msgs {
			if m.Header.Type != nfnlSubsysQueue<<8|nfqnlMsgPacket {
				continue
			}
			if id, ok := packetID(m.Data); ok {
				q.held = append(q.held, heldPacket{id, now.Add(q.delay)})
				q.packets++
			}
		}
		if len(q.held) > q.maxHeld {
			q.maxHeld = len(q.held)
		}
		q.mu.Unlock()
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// packetID finds NFQA_PACKET_HDR's id after the 4-byte nfgenmsg.
func packetID(data []byte) (uint32, bool) {
	if len(data) < 4 {
		return 0, false
	}
	b := data[4:]
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff
		if l < 4 || l > len(b) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(b[4:]), true
		}
		b = b[min((l+3)&^3, len(b)):]
	}
	return 0, false
}

// release accepts the held packets as they come due, all due ones at once.
func (q *queue) release() {
	for {
		q.mu.Lock()
		if len(q.held) == 0 {
			q.mu.Unlock()
			<-q.wake
			continue
		}
		wait := time.Until(q.held[0].due)
		if wait > 0 {
			q.mu.Unlock()
			time.Sleep(wait)
			continue
		}
		now := time.Now()
		i := 0
		for i < len(q.held) && !q.held[i].due.After(now) {
			i++
		}
		last := q.held[i-1].id
		q.held = append(q.held[:0], q.held[i:]...)
		q.mu.Unlock()
		hdr := binary.BigEndian.AppendUint32(nil, nfAccept)
		hdr = binary.BigEndian.AppendUint32(hdr, last)
		msg := message(nfqnlMsgVerdictB, unix.NLM_F_REQUEST, attr(nfqaVerdictHdr, hdr))
		for {
			err := unix.Sendto(q.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				log.Fatalf("nfqdelay: %s: verdict: %v", q.ns, err)
			}
			break
		}
	}
}
