package ledger

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCheckpointsBesideTheWriters: committed rows reach the database file
// while the ledger stays open and its writer holds no turn, far below the
// autocheckpoint's 10,000 pages; before the checkpointer, only the
// commit that crossed that bound (or Close) folded the log in, in the
// writer's turn. The file is read as a reader that ignores the log
// would read it (nothing is lost either way: the log is committed).
func TestCheckpointsBesideTheWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	before := fileSize(t, path)
	record(t, l, "a.md")
	// A liveness bound, not a speed check: the checkpointer runs within
	// checkpointEvery of a commit.
	deadline := time.Now().Add(10 * time.Second)
	for fileSize(t, path) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("ledger.db is still %d bytes 10 s after a commit: the log was not checkpointed beside the writer", before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Close stops the checkpointer; a second close of it is harmless.
	l.ckpt.close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); !os.IsNotExist(err) {
		t.Errorf("Close left the log: %v", err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
