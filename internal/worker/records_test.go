package worker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/handoff-sync/handoff/claim"
)

// captureRecorder is a claim.Recorder that keeps what it was sent and
// answers Unarchived with unarchived.
type captureRecorder struct {
	mu         sync.Mutex
	recorded   []claim.Source
	contents   map[string][]byte
	archived   []claim.Source
	unarchived []claim.Source
}

func (c *captureRecorder) StoreSources(_ context.Context, _ string, srcs []claim.Source, contents map[string][]byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recorded = append(c.recorded, srcs...)
	if c.contents == nil {
		c.contents = map[string][]byte{}
	}
	for sha, data := range contents {
		c.contents[sha] = data
	}
	return len(srcs) - 1, nil
}

func (c *captureRecorder) MarkArchived(_ context.Context, srcs []claim.Source) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.archived = append(c.archived, srcs...)
	if len(srcs) > 0 && srcs[0].Name == "refused.md" {
		return errors.New("refused")
	}
	return nil
}

func (c *captureRecorder) Unarchived(context.Context, string) ([]claim.Source, error) {
	return c.unarchived, nil
}

// recordsPairT is a records connection's two ends, as a run and its
// worker hold them.
func recordsPairT(t *testing.T) (runEnd, workerEnd net.Conn) {
	t.Helper()
	runEnd, child, err := recordsPair()
	if err != nil {
		t.Fatal(err)
	}
	workerEnd, err = fileConn(child)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runEnd.Close(); workerEnd.Close() })
	return runEnd, workerEnd
}

// Invariant: a source is recorded as the host named it, with the bytes
// it held. Names, inboxes, archive names and contents cross a worker's
// records connection byte for byte, invalid UTF-8 and NUL included, many
// calls at once, each answered as its own.
func TestRecordsConnectionExact(t *testing.T) {
	ctx := context.Background()
	runEnd, workerEnd := recordsPairT(t)
	cap := &captureRecorder{unarchived: []claim.Source{{Host: "h", Inbox: "/in\xff", Name: "u\xfe.md", SHA256: "ab", Size: 7, ArchivedAs: "processed/u.ab.md"}}}
	served := make(chan error, 1)
	go func() { served <- serveRecords(ctx, runEnd, cap) }()
	c := newRecordClient(workerEnd)

	oddData := []byte("\x00caf\xe9 \xff\xfe\r\n# not UTF-8\x00")
	odd := claim.Source{Host: "h", Inbox: "/home/\xc3\x28repo/.claude/memory-handoffs", Name: "caf\xe9.md", SHA256: strings.Repeat("f", 64), Size: 3, ArchivedAs: "processed/caf\xe9.ffffffffffff.md", Parses: true}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			n, err := c.StoreSources(ctx, "run", []claim.Source{odd, odd}, map[string][]byte{odd.SHA256: oddData})
			if n != 1 || err != nil {
				t.Errorf("StoreSources: %d, %v; want the recorder's 1", n, err)
			}
		})
	}
	wg.Wait()
	if err := c.MarkArchived(ctx, []claim.Source{{Host: "h", Name: "refused.md"}}); err == nil || err.Error() != "refused" {
		t.Errorf("MarkArchived refused by the run: %v, want its error", err)
	}
	got, err := c.Unarchived(ctx, "h")
	if err != nil || !slices.Equal(got, cap.unarchived) {
		t.Errorf("Unarchived: %+v, %v; want %+v", got, err, cap.unarchived)
	}
	if len(cap.recorded) != 32 {
		t.Fatalf("%d sources recorded, want 32", len(cap.recorded))
	}
	for _, s := range cap.recorded {
		if s != odd {
			t.Fatalf("recorded %#v, sent %#v", s, odd)
		}
	}
	if got := cap.contents[odd.SHA256]; string(got) != string(oddData) || len(cap.contents) != 1 {
		t.Errorf("contents stored %q (%d in all), sent %q", got, len(cap.contents), oddData)
	}
	workerEnd.Close()
	if err := <-served; err != nil {
		t.Errorf("serveRecords after the worker closed its end: %v", err)
	}
}

// Invariant: no remote copy archived before its record is durable. When
// the run's end of the connection goes (the run died) a call fails, and
// so does every later one: a worker never takes a lost answer for a
// recorded batch.
func TestRecordsConnectionRunGone(t *testing.T) {
	ctx := context.Background()
	runEnd, workerEnd := recordsPairT(t)
	c := newRecordClient(workerEnd)
	done := make(chan error, 1)
	go func() {
		_, err := c.StoreSources(ctx, "run", []claim.Source{{Host: "h", Name: "a.md"}}, map[string][]byte{"": nil})
		done <- err
	}()
	// The run reads the call and dies without answering.
	var n [4]byte
	if _, err := runEnd.Read(n[:]); err != nil {
		t.Fatal(err)
	}
	if size := binary.BigEndian.Uint32(n[:]); size == 0 || size > maxRecordFrame {
		t.Fatalf("frame of %d bytes", size)
	}
	runEnd.Close()
	if err := <-done; err == nil {
		t.Fatal("StoreSources succeeded though the run never answered")
	}
	if err := c.MarkArchived(ctx, []claim.Source{{Host: "h", Name: "a.md"}}); err == nil {
		t.Fatal("MarkArchived succeeded after the connection ended")
	}
}

// A message over the bound is refused by the reader, before it is read.
func TestRecordsFrameBounded(t *testing.T) {
	runEnd, workerEnd := recordsPairT(t)
	defer workerEnd.Close()
	served := make(chan error, 1)
	go func() { served <- serveRecords(context.Background(), runEnd, &captureRecorder{}) }()
	workerEnd.Write(binary.BigEndian.AppendUint32(nil, maxRecordFrame+1))
	if err := <-served; err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("serveRecords after an oversized frame: %v, want a bound error", err)
	}
}

// rawFrame is a frame as a hostile worker might make it: its JSON
// length field says jsonLen, whatever the JSON's real length.
func rawFrame(jsonLen uint32, js string, payload string) []byte {
	body := binary.BigEndian.AppendUint32(nil, jsonLen)
	body = append(append(body, js...), payload...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// Invariant: nothing a worker sends makes the run store bytes that its
// message does not carry exactly. A store's contents must account for
// its payload byte for byte: a content longer than what is left, bytes
// no content names, a negative size, a JSON length past the frame, and
// contents on a call that is not a store each end the connection with
// an error, and nothing reaches the recorder.
func TestRecordsConnectionHostileFrames(t *testing.T) {
	store := func(contents string) string {
		return `{"id":1,"op":"store","sources":[{"h":"aA==","n":"YS5tZA=="}],"contents":` + contents + `}`
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"content past the payload", rawFrame(uint32(len(store(`[{"s":"x","n":5}]`))), store(`[{"s":"x","n":5}]`), "abc"), "left in the message"},
		{"bytes no content names", rawFrame(uint32(len(store(`[{"s":"x","n":1}]`))), store(`[{"s":"x","n":1}]`), "abc"), "no content names"},
		{"negative size", rawFrame(uint32(len(store(`[{"s":"x","n":-1}]`))), store(`[{"s":"x","n":-1}]`), "abc"), "left in the message"},
		{"JSON length past the frame", rawFrame(1<<20, store(`[]`), ""), "claims"},
		{"contents on an archive call", rawFrame(uint32(len(`{"id":1,"op":"archived"}`)), `{"id":1,"op":"archived"}`, "abc"), "bytes of contents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runEnd, workerEnd := recordsPairT(t)
			cap := &captureRecorder{}
			served := make(chan error, 1)
			go func() { served <- serveRecords(context.Background(), runEnd, cap) }()
			if _, err := workerEnd.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			// A store is answered with its error; the others end the
			// connection.
			var rep recordReply
			if _, err := readFrame(workerEnd, &rep); err == nil {
				if !strings.Contains(rep.Error, tc.want) {
					t.Fatalf("answer %+v, want an error with %q", rep, tc.want)
				}
				workerEnd.Close()
				if err := <-served; err != nil {
					t.Fatalf("serveRecords: %v", err)
				}
			} else if err := <-served; err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serveRecords: %v, want an error with %q", err, tc.want)
			}
			cap.mu.Lock()
			defer cap.mu.Unlock()
			if len(cap.recorded) != 0 || len(cap.contents) != 0 || len(cap.archived) != 0 {
				t.Fatalf("recorder got %d sources, %d contents, %d archived from a hostile frame", len(cap.recorded), len(cap.contents), len(cap.archived))
			}
		})
	}
}

// Invariant: none applied twice, none lost, in the order found. Batches a
// worker queues one after another, without waiting for each answer, reach
// the run's queue in the order sent, though the run answers calls
// concurrently: the ledger commits them in that order.
func TestRecordsConnectionKeepsOrder(t *testing.T) {
	ctx := context.Background()
	runEnd, workerEnd := recordsPairT(t)
	f := &fakeStore{hold: make(chan struct{})}
	q := StartRecordQueue(f, "run", quietLog())
	defer q.Stop()
	served := make(chan error, 1)
	go func() { served <- serveRecords(ctx, runEnd, q.Recorder("h")) }()
	c := newRecordClient(workerEnd)
	var want []string
	var waits []func() (int, error)
	for i := range 24 {
		name := fmt.Sprintf("b%02d.md", i)
		want = append(want, name)
		wait, err := c.QueueSources(ctx, "run", []claim.Source{src("h", name)}, fakeContents)
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, wait)
		if i == 0 {
			// Let the first reach the queue and hold its commit, so
			// that the others wait there together.
			for f.mu.Lock(); !f.held; f.mu.Lock() {
				f.mu.Unlock()
				runtime.Gosched()
			}
			f.mu.Unlock()
		}
	}
	close(f.hold)
	for i, wait := range waits {
		if n, err := wait(); n != 1 || err != nil {
			t.Fatalf("batch %d: %d, %v", i, n, err)
		}
	}
	var got []string
	for _, a := range f.applies {
		got = append(got, a...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("committed in the order %q, sent %q", got, want)
	}
	workerEnd.Close()
	if err := <-served; err != nil {
		t.Errorf("serveRecords: %v", err)
	}
}
