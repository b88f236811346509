package hostile

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

var (
	_ Engine = (*VFS)(nil)
	_ Engine = (*Raw)(nil)
)

// dial logs in to srv with its own key and known_hosts and starts SFTP.
func dial(t *testing.T, srv *Server) *sftp.Client {
	t.Helper()
	pem, err := os.ReadFile(srv.IdentityFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	check, err := knownhosts.New(srv.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{
		User: srv.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: check, Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sftp.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); conn.Close() })
	return c
}

// The VFS says what it is told: listings with names no file system holds,
// an LSTAT and an FSTAT that disagree, a rename that does nothing.
func TestVFSLies(t *testing.T) {
	v := NewVFS("/home/h")
	in := v.Add("/home/h/in", Dir())
	in.Extra = []os.FileInfo{Entry("esc\x1b.md", 0o600, 10)}
	f := v.Add("/home/h/in/a.md", File("0123456789"))
	f.Fstat = func(int64) (int64, fs.FileMode) { return 10, fs.ModeNamedPipe | 0o600 }
	v.Rename = func(_, _ string) (bool, error) { return true, nil }
	c := dial(t, Start(t, t.TempDir(), v))

	if home, err := c.RealPath("."); err != nil || home != "/home/h" {
		t.Fatalf("RealPath: %q, %v", home, err)
	}
	ents, err := c.ReadDir("/home/h/in")
	if err != nil || len(ents) != 2 || ents[0].Name() != "a.md" || ents[1].Name() != "esc\x1b.md" {
		t.Fatalf("ReadDir: %v, %v", ents, err)
	}
	if fi, err := c.Lstat("/home/h/in/a.md"); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("Lstat: %v, %v", fi, err)
	}
	h, err := c.Open("/home/h/in/a.md")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := h.Stat(); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Fatalf("Fstat: %v, %v, want a named pipe", fi, err)
	}
	if b, err := io.ReadAll(h); err != nil || string(b) != "0123456789" || f.Served() != 10 {
		t.Fatalf("read %q, %v; served %d", b, err, f.Served())
	}
	h.Close()
	if err := c.Rename("/home/h/in/a.md", "/home/h/in/b.md"); err != nil || v.Node("/home/h/in/a.md") == nil {
		t.Fatalf("Rename: %v; the lie must leave a.md in place", err)
	}
	if !v.Touched("/home/h/in/b.md") || v.Touched("/home/h/in/c.md") {
		t.Fatalf("Touched does not match the requests %q", v.Requests())
	}
	v.Rename = nil
	if err := c.Mkdir("/home/h/in/p"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename("/home/h/in/a.md", "/home/h/in/p/a.md"); err != nil || v.Node("/home/h/in/p/a.md") == nil {
		t.Fatalf("honest Rename: %v", err)
	}
	v.Add("/home/h/in/taken.md", File("x"))
	if err := c.Rename("/home/h/in/p/a.md", "/home/h/in/taken.md"); err == nil {
		t.Fatal("Rename replaced an existing file")
	}
}

// A Node.Read that waits returns once the client hangs up.
func TestVFSBlockedReadEndsWithSession(t *testing.T) {
	v := NewVFS("/h")
	done := make(chan struct{})
	v.Add("/h/slow.md", File("x")).Read = func(ctx context.Context, p []byte, _ int64) (int, error) {
		<-ctx.Done()
		close(done)
		return 0, ctx.Err()
	}
	c := dial(t, Start(t, t.TempDir(), v))
	h, err := c.Open("/h/slow.md")
	if err != nil {
		t.Fatal(err)
	}
	go h.Read(make([]byte, 10))
	time.Sleep(100 * time.Millisecond)
	c.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked read did not end when the client hung up")
	}
}

// Raw serves an honest tree until Hook says otherwise.
func TestRaw(t *testing.T) {
	r := &Raw{Home: "/h", Files: map[string]string{"/h/in/a.md": "hello"}}
	r.Hook = func(q Request) []byte {
		if q.Type == FxpLstat && strings.HasSuffix(q.Path, "/lie.md") {
			return Frame(U32([]byte{FxpStatus}, q.ID)) // truncated
		}
		return nil
	}
	c := dial(t, Start(t, t.TempDir(), r))
	ents, err := c.ReadDir("/h/in")
	if err != nil || len(ents) != 1 || ents[0].Name() != "a.md" || ents[0].Size() != 5 {
		t.Fatalf("ReadDir: %v, %v", ents, err)
	}
	h, err := c.Open("/h/in/a.md")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(h); err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	h.Close()
	if err := c.Mkdir("/h/in/p"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename("/h/in/a.md", "/h/in/p/a.md"); err != nil || r.Snapshot()["/h/in/p/a.md"] != "hello" {
		t.Fatalf("Rename: %v", err)
	}
	if _, err := c.Lstat("/h/in/lie.md"); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Lstat with a truncated status: %v, want a protocol error", err)
	}
}
