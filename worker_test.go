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
