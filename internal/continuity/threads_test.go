package continuity

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
)

// countingSpool counts the Gets of a spool.
type countingSpool struct {
	spool.Store
	gets map[string]int
}

func (c *countingSpool) Get(sha string) ([]byte, error) {
	c.gets[sha]++
	return c.Store.Get(sha)
}

// Record takes the thread of a handoff the ingester planned from the
// ingester (Ingester.Thread) and reads the spool only for the others (a
// handoff that failed validation, a malformed one); the threads it
// records are those that reading every handoff gives.
func TestRecordTakesThreadsFromTheIngester(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "TOOLS.md"), []byte("# Tools\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inbox := "/home/me/code/app/.claude/memory-handoffs"
	texts := map[string]string{
		"a.md":       handoffText("Pick the queue"),
		"b.md":       handoffText("Broker chosen", "Continues", "a.md"),
		"c.md":       handoffText("Deployed", "Continues", "- `b.md`"),
		"invalid.md": "# Memory Handoff\n\n## Type\ndecision\n\n## Title\nNo summary\n\n## Continues\na.md\n",
		"junk.md":    "not a handoff\n## Continues\na.md\n",
	}
	var srcs []claim.Source
	for name, text := range texts {
		sha := hsum(text)
		if err := w.sp.Put(map[string][]byte{sha: []byte(text)}); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, claim.Source{Host: "laptop", Inbox: inbox, Name: name, SHA256: sha, Size: int64(len(text)),
			ArchivedAs: "processed/" + claim.ArchiveName(name, sha), Parses: ingest.Parses([]byte(text))})
	}
	if _, err := w.led.RecordSources(ctx, "run-1", srcs); err != nil {
		t.Fatal(err)
	}
	in, err := ingest.New(ingest.Options{Workspace: ws, RunID: "run-1"}, w.led, w.sp)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	entries, err := in.Run(ctx)
	if err != nil || len(entries) != len(texts) {
		t.Fatalf("ingest: %d entries, %v", len(entries), err)
	}
	results := map[string]string{}
	for _, e := range entries {
		results[e.Name] = e.Result
	}

	cs := &countingSpool{Store: w.sp, gets: map[string]int{}}
	if err := Record(ctx, w.led, cs, "run-1", nil, EntrySHAs(entries), in.Thread); err != nil {
		t.Fatal(err)
	}
	rows := func() map[string]string {
		got := map[string]string{}
		r, err := w.led.DB().Query(`SELECT sha256, continues FROM threads`)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for r.Next() {
			var sha, key string
			r.Scan(&sha, &key)
			got[sha] = key
		}
		return got
	}
	withIngester := rows()
	for name, text := range texts {
		_, planned := in.Thread(hsum(text))
		if n := cs.gets[hsum(text)]; planned != (n == 0) || n > 1 {
			t.Errorf("%s (%s): planned %v, read from the spool %d times", name, results[name], planned, n)
		}
		if planned && (name == "invalid.md" || name == "junk.md") {
			t.Errorf("%s was planned (%s)", name, results[name])
		}
	}
	if withIngester[hsum(texts["b.md"])] != "a.md" || withIngester[hsum(texts["c.md"])] != "b.md" {
		t.Errorf("threads %v; want b continuing a.md, c continuing b.md", withIngester)
	}

	if _, err := w.led.DB().Exec(`DELETE FROM threads`); err != nil {
		t.Fatal(err)
	}
	if err := Record(ctx, w.led, w.sp, "run-1", nil, EntrySHAs(entries), nil); err != nil {
		t.Fatal(err)
	}
	if fromSpool := rows(); !maps.Equal(fromSpool, withIngester) {
		t.Errorf("threads through the ingester %v, reading every handoff %v", withIngester, fromSpool)
	}
}
