package handoff

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// TestRelayLogProgress: a worker's progress lines become "pulling" updates
// for Options.Progress (and stay in the log); nothing else does, and
// nonsense counts read as 0.
func TestRelayLogProgress(t *testing.T) {
	in := strings.Join([]string{
		`{"time":"t","level":"DEBUG","msg":"progress","host":"laptop","inboxes":2,"pulled":5}`,
		`{"time":"t","level":"INFO","msg":"handoff","name":"a.md"}`,
		`not json`,
		`{"level":"DEBUG","msg":"progress","inboxes":-3,"pulled":"many"}`,
	}, "\n") + "\n"
	var got []HostProgress
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	relayLog(strings.NewReader(in), "laptop", log, func(p HostProgress) { got = append(got, p) })
	want := []HostProgress{{Host: "laptop", State: "pulling", Inboxes: 2, Pulled: 5}, {Host: "laptop", State: "pulling"}}
	if !slices.Equal(got, want) {
		t.Fatalf("progress %+v, want %+v", got, want)
	}
	if !strings.Contains(logged.String(), "msg=handoff") || !strings.Contains(logged.String(), "msg=progress") {
		t.Fatalf("log lost lines:\n%s", logged.String())
	}
	relayLog(strings.NewReader(in), "laptop", log, nil) // no callback: logs only
}

// TestReadWorkerBounded: the parent hands on at most the two values a
// worker may send and reads the rest of its output away, so that nothing
// the sessions wait for is taken by another reader, and a worker that
// writes too much never blocks on a full pipe.
func TestReadWorkerBounded(t *testing.T) {
	in := strings.NewReader(`{"a":1}` + "\n" + `{"b":2}` + "\n" + `{"c":3}` + "\n" + strings.Repeat("x", 1<<16))
	msgs, done := readWorker(in, 1<<20)
	<-done
	var got []string
	for m := range msgs {
		if m.err != nil {
			got = append(got, "err")
			continue
		}
		got = append(got, string(m.data))
	}
	if want := []string{`{"a":1}`, `{"b":2}`, "err"}; !slices.Equal(got, want) {
		t.Fatalf("messages %q; want %q", got, want)
	}
	if in.Len() != 0 {
		t.Errorf("%d bytes left unread", in.Len())
	}
}
