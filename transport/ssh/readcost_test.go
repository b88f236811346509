package ssh

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// BenchmarkReadListedOpenSSH reads just-listed 1.5 KiB files from OpenSSH's
// own sftp-server, 32 at a time, as a pull's claims do, and reports what
// the server spends on each (server-ns/op, its user and system CPU over the
// benchmark) beside the client's time. The server's share is what a pull
// costs the hosts; the client's, the canonical host.
func BenchmarkReadListedOpenSSH(b *testing.B) {
	const bin = "/usr/lib/openssh/sftp-server"
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv(sshdtest.RequiredEnv) != "" {
			b.Fatalf("%s: %v (install openssh-sftp-server)", bin, err)
		}
		b.Skipf("%s: %v (install openssh-sftp-server)", bin, err)
	}
	dir := b.TempDir()
	content := bytes.Repeat([]byte("a handoff line\n"), 100)
	for i := range 256 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("h%03d.md", i)), content, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.Command(bin)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	f, err := newFS(out, in, Config{Alias: "bench"}, slog.New(slog.DiscardHandler), true)
	if err != nil {
		b.Fatal(err)
	}
	f.openSSH = true
	ents, err := f.ReadDir(ctxT(b), dir, 0)
	if err != nil || len(ents) != 256 {
		b.Fatalf("ReadDir: %d entries, %v", len(ents), err)
	}
	b.SetParallelism(16) // 32 reads in flight on two cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			fi := ents[i%len(ents)]
			i++
			data, _, err := f.ReadListed(ctxT(b), filepath.Join(dir, fi.Name), fi, 1<<20)
			if err != nil || len(data) != len(content) {
				b.Errorf("ReadListed %s: %d bytes, %v", fi.Name, len(data), err)
				return
			}
		}
	})
	b.StopTimer()
	f.Close()
	in.Close()
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		b.Logf("sftp-server: %v", err)
	}
	st := cmd.ProcessState
	b.ReportMetric(float64((st.UserTime()+st.SystemTime()).Nanoseconds())/float64(b.N), "server-ns/op")
}
