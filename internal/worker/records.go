package worker

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/failpoint"
)

// A worker records what it stores and archives through the run that
// started it, over a connection of its own (a socket pair; the worker's
// end is its file descriptor 3): the run's RecordQueue is the ledger's one
// writer. Each message is a frame: a 4-byte length and that many bytes,
// which are a 4-byte length, that many bytes of JSON, and the payload: the
// exact bytes of the contents the JSON lists, one after another (base64
// in the JSON cost the run and its workers a tenth of a second of CPU
// at the bulk cell). Calls carry an id, and a worker may have several in
// flight.

// recordsFD is the worker's end of its records connection.
const recordsFD = 3

// maxRecordFrame bounds one message either way: a batch is at most 256
// sources and 16 MiB of contents (claim's batchBytes, plus a file that
// took it over).
const maxRecordFrame = 48 << 20

// Record calls.
const (
	opStore      = "store"
	opArchived   = "archived"
	opUnarchived = "unarchived"
)

type recordCall struct {
	ID      uint64       `json:"id"`
	Op      string       `json:"op"`
	Host    []byte       `json:"host,omitempty"`
	Sources []wireSource `json:"sources,omitempty"`
	// Contents are the sources' exact bytes (opStore), one per distinct
	// hash.
	Contents []wireContent `json:"contents,omitempty"`
}

// wireContent is one content on the connection: its bytes are the next
// Size bytes of the frame's payload.
type wireContent struct {
	SHA256 string `json:"s"`
	Size   int    `json:"n"`
}

type recordReply struct {
	ID      uint64       `json:"id"`
	Added   int          `json:"added,omitempty"`
	Sources []wireSource `json:"sources,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// wireSource is a claim.Source on the connection. Its strings go as bytes,
// which JSON carries exactly: as strings, JSON would replace invalid UTF-8,
// and a path a host named with it would be recorded as another.
type wireSource struct {
	Host       []byte `json:"h"`
	Inbox      []byte `json:"i"`
	Name       []byte `json:"n"`
	SHA256     []byte `json:"s"`
	Size       int64  `json:"z"`
	ArchivedAs []byte `json:"a,omitempty"`
	Parses     bool   `json:"p,omitempty"`
}

func toWire(srcs []claim.Source) []wireSource {
	out := make([]wireSource, len(srcs))
	for i, s := range srcs {
		out[i] = wireSource{Host: []byte(s.Host), Inbox: []byte(s.Inbox), Name: []byte(s.Name), SHA256: []byte(s.SHA256),
			Size: s.Size, ArchivedAs: []byte(s.ArchivedAs), Parses: s.Parses}
	}
	return out
}

func fromWire(ws []wireSource) []claim.Source {
	out := make([]claim.Source, len(ws))
	for i, w := range ws {
		out[i] = claim.Source{Host: string(w.Host), Inbox: string(w.Inbox), Name: string(w.Name), SHA256: string(w.SHA256),
			Size: w.Size, ArchivedAs: string(w.ArchivedAs), Parses: w.Parses}
	}
	return out
}

// writeFrame writes v as JSON, then payload, in one frame and one write.
func writeFrame(w io.Writer, v any, payload ...[]byte) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	size := 4 + len(b)
	for _, p := range payload {
		size += len(p)
	}
	if size > maxRecordFrame {
		return fmt.Errorf("records: a message of %d bytes (at most %d)", size, maxRecordFrame)
	}
	frame := make([]byte, 0, 4+size)
	frame = binary.BigEndian.AppendUint32(frame, uint32(size))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(b)))
	frame = append(frame, b...)
	for _, p := range payload {
		frame = append(frame, p...)
	}
	_, err = w.Write(frame)
	return err
}

// readFrame reads one frame into v and returns its payload.
func readFrame(r io.Reader, v any) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size < 4 || size > maxRecordFrame {
		return nil, fmt.Errorf("records: a message of %d bytes (at least 4, at most %d)", size, maxRecordFrame)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("records: %w", noEOF(err))
	}
	j := binary.BigEndian.Uint32(b)
	if j > size-4 {
		return nil, fmt.Errorf("records: a message of %d bytes claims %d bytes of JSON", size, j)
	}
	if err := json.Unmarshal(b[4:4+j], v); err != nil {
		return nil, err
	}
	return b[4+j:], nil
}

// splitContents gives each listed content its bytes from the payload,
// which must hold exactly theirs, in order.
func splitContents(wc []wireContent, payload []byte) (map[string][]byte, error) {
	contents := make(map[string][]byte, len(wc))
	for _, c := range wc {
		if c.Size < 0 || c.Size > len(payload) {
			return nil, fmt.Errorf("records: content %.12s of %d bytes, %d left in the message", c.SHA256, c.Size, len(payload))
		}
		// A copy of its own: a content kept for the ingester must not
		// hold the whole message in memory.
		contents[c.SHA256] = append(make([]byte, 0, c.Size), payload[:c.Size]...)
		payload = payload[c.Size:]
	}
	if len(payload) != 0 {
		return nil, fmt.Errorf("records: %d bytes in the message that no content names", len(payload))
	}
	return contents, nil
}

// noEOF: a frame cut short is not a clean end.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// recordClient is the worker's claim.Recorder: each call goes to the run
// and returns its answer. Once the connection fails, every call fails.
type recordClient struct {
	conn net.Conn
	wmu  sync.Mutex

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan recordReply
	err     error
}

var _ claim.QueueRecorder = (*recordClient)(nil)

func newRecordClient(conn net.Conn) *recordClient {
	c := &recordClient{conn: conn, pending: make(map[uint64]chan recordReply)}
	go c.read()
	return c
}

func (c *recordClient) read() {
	r := bufio.NewReader(c.conn)
	for {
		var rep recordReply
		if _, err := readFrame(r, &rep); err != nil {
			c.mu.Lock()
			c.err = fmt.Errorf("records: the connection to the run ended: %w", err)
			for id, ch := range c.pending {
				close(ch)
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		ch := c.pending[rep.ID]
		delete(c.pending, rep.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
}

func (c *recordClient) call(ctx context.Context, call recordCall) (recordReply, error) {
	answer, err := c.send(call, nil)
	if err != nil {
		return recordReply{}, err
	}
	return answer(ctx)
}

// send puts call, with payload after its JSON, on the connection and
// returns a function that waits for its answer. Calls reach the run in
// the order they were sent.
func (c *recordClient) send(call recordCall, payload [][]byte) (answer func(context.Context) (recordReply, error), err error) {
	ch := make(chan recordReply, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.next++
	call.ID = c.next
	c.pending[call.ID] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, call.ID)
		c.mu.Unlock()
	}
	c.wmu.Lock()
	err = writeFrame(c.conn, call, payload...)
	c.wmu.Unlock()
	if err != nil {
		forget()
		return nil, fmt.Errorf("records: %w", err)
	}
	return func(ctx context.Context) (recordReply, error) {
		select {
		case rep, ok := <-ch:
			if !ok {
				c.mu.Lock()
				defer c.mu.Unlock()
				return recordReply{}, c.err
			}
			if rep.Error != "" {
				return rep, errors.New(rep.Error)
			}
			return rep, nil
		case <-ctx.Done():
			forget()
			return recordReply{}, ctx.Err()
		}
	}, nil
}

// StoreSources leaves runID out: the run records under its own.
func (c *recordClient) StoreSources(ctx context.Context, runID string, srcs []claim.Source, contents map[string][]byte) (int, error) {
	wait, err := c.QueueSources(ctx, runID, srcs, contents)
	if err != nil {
		return 0, err
	}
	return wait()
}

// QueueSources returns once the batch is on the connection: the run
// queues a worker's batches in the order they arrive.
func (c *recordClient) QueueSources(ctx context.Context, _ string, srcs []claim.Source, contents map[string][]byte) (wait func() (int, error), err error) {
	wc := make([]wireContent, 0, len(contents))
	payload := make([][]byte, 0, len(contents))
	for sha, data := range contents {
		wc = append(wc, wireContent{SHA256: sha, Size: len(data)})
		payload = append(payload, data)
	}
	answer, err := c.send(recordCall{Op: opStore, Sources: toWire(srcs), Contents: wc}, payload)
	if err != nil {
		return nil, err
	}
	failpoint.Inject("store.sent")
	return func() (int, error) {
		rep, err := answer(ctx)
		return rep.Added, err
	}, nil
}

func (c *recordClient) MarkArchived(ctx context.Context, srcs []claim.Source) error {
	_, err := c.call(ctx, recordCall{Op: opArchived, Sources: toWire(srcs)})
	return err
}

func (c *recordClient) Unarchived(ctx context.Context, host string) ([]claim.Source, error) {
	rep, err := c.call(ctx, recordCall{Op: opUnarchived, Host: []byte(host)})
	return fromWire(rep.Sources), err
}

// maxRecordCalls bounds the calls of one worker the run works on at once
// (a pull has up to claim's maxRecording batches being recorded, and
// a few marked archived).
const maxRecordCalls = 8

// serveRecords answers a worker's calls with rec until the connection
// ends, then closes it. Calls are answered as they finish, each with its
// id.
func serveRecords(ctx context.Context, conn net.Conn, rec claim.Recorder) error {
	defer conn.Close()
	var wmu sync.Mutex
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxRecordCalls)
	r := bufio.NewReader(conn)
	for {
		var call recordCall
		payload, err := readFrame(r, &call)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if call.Op != opStore && len(payload) != 0 {
			return fmt.Errorf("records: a %q call with %d bytes of contents", call.Op, len(payload))
		}
		// A store whose payload does not match its contents ends the
		// connection, and with it the worker's later calls: answering
		// it alone would let a later batch be recorded before it.
		var contents map[string][]byte
		if call.Op == opStore {
			if contents, err = splitContents(call.Contents, payload); err != nil {
				return err
			}
		}
		slots <- struct{}{}
		answer := startCall(ctx, rec, call, contents)
		wg.Go(func() {
			defer func() { <-slots }()
			rep := answer()
			rep.ID = call.ID
			wmu.Lock()
			defer wmu.Unlock()
			writeFrame(conn, rep) // a worker gone has no use for it
		})
	}
}

// startCall starts one call with rec and returns what answers it. A store
// is queued before startCall returns when rec is a claim.QueueRecorder,
// so that a worker's batches are committed in the order it sent them;
// every other call runs in answer.
func startCall(ctx context.Context, rec claim.Recorder, call recordCall, contents map[string][]byte) (answer func() recordReply) {
	reply := func(rep recordReply, err error) recordReply {
		if err != nil {
			rep.Error = err.Error()
		}
		return rep
	}
	switch call.Op {
	case opStore:
		srcs := fromWire(call.Sources)
		q, ok := rec.(claim.QueueRecorder)
		if !ok {
			return func() recordReply {
				n, err := rec.StoreSources(ctx, "", srcs, contents)
				return reply(recordReply{Added: n}, err)
			}
		}
		wait, err := q.QueueSources(ctx, "", srcs, contents)
		return func() recordReply {
			if err != nil {
				return reply(recordReply{}, err)
			}
			n, err := wait()
			return reply(recordReply{Added: n}, err)
		}
	case opArchived:
		return func() recordReply { return reply(recordReply{}, rec.MarkArchived(ctx, fromWire(call.Sources))) }
	case opUnarchived:
		return func() recordReply {
			srcs, err := rec.Unarchived(ctx, string(call.Host))
			return reply(recordReply{Sources: toWire(srcs)}, err)
		}
	default:
		return func() recordReply { return reply(recordReply{}, fmt.Errorf("records: unknown call %q", call.Op)) }
	}
}

// recordsPair makes a worker's records connection: the run's end, and the
// file to hand the worker as its descriptor recordsFD.
func recordsPair() (net.Conn, *os.File, error) {
	fds, err := socketPair()
	if err != nil {
		return nil, nil, fmt.Errorf("records connection: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), "records")
	conn, err := fileConn(os.NewFile(uintptr(fds[0]), "records"))
	if err != nil {
		child.Close()
		return nil, nil, fmt.Errorf("records connection: %w", err)
	}
	return conn, child, nil
}

// fileConn turns a socket's file into a net.Conn, and closes the file.
func fileConn(f *os.File) (net.Conn, error) {
	defer f.Close()
	return net.FileConn(f)
}

// RecordsConn is a worker's end of its records connection.
func RecordsConn() (net.Conn, error) {
	conn, err := fileConn(os.NewFile(recordsFD, "records"))
	if err != nil {
		return nil, fmt.Errorf("worker: the records connection (descriptor %d): %w; a worker is started by handoff sync, not by hand", recordsFD, err)
	}
	return conn, nil
}
