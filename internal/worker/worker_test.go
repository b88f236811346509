package worker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/mirror"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

// TestRelayLogProgress: a worker's progress lines become progress
// updates (the run's "pulling" state) and stay in the log; nothing else
// does, and nonsense counts read as 0.
func TestRelayLogProgress(t *testing.T) {
	in := strings.Join([]string{
		`{"time":"t","level":"DEBUG","msg":"progress","host":"laptop","inboxes":2,"pulled":5}`,
		`{"time":"t","level":"INFO","msg":"handoff","name":"a.md"}`,
		`not json`,
		`{"level":"DEBUG","msg":"progress","inboxes":-3,"pulled":"many"}`,
	}, "\n") + "\n"
	var got [][2]int
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	relayLog(strings.NewReader(in), "laptop", log, func(inboxes, pulled int) { got = append(got, [2]int{inboxes, pulled}) })
	want := [][2]int{{2, 5}, {0, 0}}
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

// TestWireNames: the JSON names of the jobs a parent sends its worker
// stay what they are, so that a worker and a parent agree on every field
// (a worker refuses a job with a field it does not know).
func TestWireNames(t *testing.T) {
	for _, c := range []struct {
		v    any
		want []string
	}{
		{Job{RunID: "r", WalkHint: "w", DryRun: true, Mirror: true, SSHConfig: &sshfs.ConfigFile{}, Procs: 1},
			[]string{"dry_run", "host", "mirror", "procs", "run_id", "ssh_config", "walk_hint"}},
		{mirror.Job{Skip: true, Workspace: "ws", StateFile: "st", Canonical: "c", RunID: "r", Now: time.Unix(0, 0), DryRun: true, WorkspaceID: "id", Adopt: true},
			[]string{"adopt", "canonical", "dry_run", "now", "run_id", "skip", "state_file", "workspace", "workspace_id"}},
	} {
		data, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, c.want) {
			t.Errorf("%T on the wire has %q, want %q", c.v, got, c.want)
		}
	}
}

// TestProcs: workers pulling at once share the cores, one thread each at
// least; a lone worker keeps them all.
func TestProcs(t *testing.T) {
	for _, c := range []struct{ cores, workers, want int }{
		{2, 8, 1}, {2, 2, 1}, {8, 2, 4}, {8, 3, 2}, {4, 1, 4}, {1, 1, 1}, {4, 0, 4},
	} {
		if got := Procs(c.cores, c.workers); got != c.want {
			t.Errorf("Procs(%d, %d) = %d, want %d", c.cores, c.workers, got, c.want)
		}
	}
}

// TestServeTakesProcs: a worker runs its Go code on as many threads as
// its job says, before it dials.
func TestServeTakesProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(2)
	records, far := net.Pipe()
	defer far.Close()
	go io.Copy(io.Discard, far)
	job := `{"host":{"name":"nowhere","transport":"nonesuch"},"run_id":"r","dry_run":true,"procs":1}`
	var out strings.Builder
	if err := Serve(context.Background(), strings.NewReader(job), &out, records, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS %d after a job with procs 1", got)
	}
	if !strings.Contains(out.String(), `"error"`) {
		t.Fatalf("report %s, want the host's failure", out.String())
	}
}
