package fsrecord

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A log as strace -f -y writes it: two threads interleaved, a split call,
// escapes, a failed call.
const sample = `100   mkdirat(AT_FDCWD</w>, "/w/d", 0700) = 0
100   openat(5</w/d>, ".tmp.x", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0600) = 7</w/d/.tmp.x>
101   write(7</w/d/.tmp.x>, "a\"b\\c\n\0\377", 8 <unfinished ...>
100   openat(AT_FDCWD</w>, "missing", O_RDONLY) = -1 ENOENT (No such file or directory)
101   <... write resumed>) = 8
101   fsync(7</w/d/.tmp.x>) = 0
100   renameat(5</w/d>, ".tmp.x", 5</w/d>, "x") = 0
100   pwrite64(9</w/db-wal>, "row", 3, 4096) = 3
100   renameat2(AT_FDCWD</w>, "/in/a.md", AT_FDCWD</w>, "/in/processed/a.1.md", RENAME_NOREPLACE) = 0
100   fsync(8</w/d>) = 0
`

func TestParse(t *testing.T) {
	ops, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 9 {
		t.Fatalf("%d ops, want 9: %v", len(ops), ops)
	}
	w := ops[3]
	if w.Call != "write" || w.Line != 3 || w.Done != 5 || w.Path != "/w/d/.tmp.x" || string(w.Data) != "a\"b\\c\n\x00\xff" {
		t.Fatalf("split write parsed as %+v", w)
	}
	if o := ops[1]; o.Call != "openat" || o.Path != "/w/d/.tmp.x" || o.FD != 7 || !o.Creates() {
		t.Fatalf("openat parsed as %+v", o)
	}
	if o := ops[2]; o.Ret != -1 || o.Errno != "ENOENT" || o.Path != "/w/missing" {
		t.Fatalf("failed openat parsed as %+v", o)
	}
	if o := ops[5]; !o.IsRename() || o.Path != "/w/d/.tmp.x" || o.Path2 != "/w/d/x" {
		t.Fatalf("renameat parsed as %+v", o)
	}
	if o := ops[6]; o.Off != 4096 || string(o.Data) != "row" {
		t.Fatalf("pwrite64 parsed as %+v", o)
	}
	if o := ops[7]; o.Path2 != "/in/processed/a.1.md" || o.Flags != "RENAME_NOREPLACE" {
		t.Fatalf("renameat2 parsed as %+v", o)
	}
}

// TestModelForgets: the model keeps only what the protocol made durable.
func TestModelForgets(t *testing.T) {
	ops, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	for _, strict := range []bool{true, false} {
		m := NewModel()
		m.NewDirsDurable = !strict
		for i, o := range ops {
			m.Apply(o)
			_, exists, _ := m.Durable("/w/d/x")
			last := i == len(ops)-1
			// Only the final fsync of /w/d makes x durable; in the strict
			// model d itself is never made durable in /w.
			if want := last && !strict; exists != want {
				t.Fatalf("strict=%v after %s: durable x exists=%v, want %v", strict, o, exists, want)
			}
		}
		if data, exists, _ := m.Volatile("/w/d/x"); !exists || len(data) != 8 {
			t.Fatalf("volatile x: %q %v", data, exists)
		}
		if _, exists, _ := m.Volatile("/w/d/.tmp.x"); exists {
			t.Fatal("the temporary name survived its rename")
		}
		if risk := m.AtRisk("/w"); strict != (len(risk) > 0) {
			t.Fatalf("strict=%v: at risk %v", strict, risk)
		}
	}
}

// TestWrapTracesRealCalls runs a shell command under strace and finds its
// file's creation, rename and directory fsync-free state.
func TestWrapTracesRealCalls(t *testing.T) {
	if !Available() {
		if os.Getenv("HANDOFF_E2E_REQUIRED") != "" {
			t.Fatal("strace is not installed (HANDOFF_E2E_REQUIRED is set)")
		}
		t.Skip("strace is not installed")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "trace.txt")
	cmd := exec.Command("sh", "-c", "echo hi > a && mv a b")
	cmd.Dir = dir
	if b, err := Wrap(cmd, out).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	ops, err := ParseFile(out)
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel()
	var created, renamed bool
	for _, o := range ops {
		m.Apply(o)
		created = created || o.Creates() && o.Path == filepath.Join(dir, "a")
		renamed = renamed || o.IsRename() && o.Path2 == filepath.Join(dir, "b")
	}
	if !created || !renamed {
		t.Fatalf("trace lacks the creation (%v) or rename (%v) of the file:\n%v", created, renamed, ops)
	}
	if data, ok, _ := m.Volatile(filepath.Join(dir, "b")); !ok || string(data) != "hi\n" {
		t.Fatalf("volatile b = %q %v", data, ok)
	}
	if _, ok, _ := m.Durable(filepath.Join(dir, "b")); ok {
		t.Fatal("b is durable although nothing was fsynced")
	}
}
