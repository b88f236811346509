package sshdtest

// Servers other than plain OpenSSH, for interoperability tests (issue 12):
// OpenSSH with Green End's gesftpserver behind a handle counter, OpenSSH
// chrooted to a directory, ProFTPD's mod_sftp, Dropbear with OpenSSH's
// sftp-server, and AsyncSSH's SFTP server. All listen on 127.0.0.1 only,
// serve the real file system, and come with the same IdentityFile and
// KnownHosts as StartOpenSSH's servers. Like StartOpenSSH, each skips the
// test when its server is not installed, and fails it instead when
// HANDOFF_E2E_REQUIRED is set. Each serves an ed25519 and an ECDSA P-256
// host key whatever Options.ECDSAHostKey says; of the other Options only
// the OpenSSH-based starters read SFTPOnly and Restrict, as StartOpenSSH
// does (StartGreenEnd refuses both: they would bypass gesftpserver).
//
// The Server type is shared with the other starters, so what only some of
// these servers have (a chroot prefix, a handle count) lives in a side
// table and is read through methods: Root, ClientPath, Handles.

import (
	"bufio"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Where Debian installs the servers StartGreenEnd, StartProFTPD,
// StartDropbear and StartAsyncSSH run.
const (
	GreenEndPath   = "/usr/libexec/gesftpserver"                       // gesftpserver
	ProFTPDPath    = "/usr/sbin/proftpd"                               // proftpd-core
	ProFTPDModSFTP = "/usr/lib/proftpd/mod_sftp.so"                    // proftpd-mod-crypto
	DropbearPath   = "/usr/sbin/dropbear"                              // dropbear-bin
	DropbearKeygen = "/usr/bin/dropbearkey"                            // dropbear-bin
	DropbearSFTP   = "/usr/lib/sftp-server"                            // openssh-sftp-server; dropbear runs this path
	PythonPath     = "/usr/bin/python3"                                // python3-asyncssh (Debian's python, not one on PATH)
	asyncsshProbe  = "/usr/lib/python3/dist-packages/asyncssh/sftp.py" // python3-asyncssh
)

// GreenEndMaxHandles is how many handles one gesftpserver session can
// hold open at once. Beyond that (Debian's 2~ds) it still answers OPEN
// with a HANDLE, but the handle is invalid (READ and CLOSE fail with
// "invalid handle") and the server corrupts its heap: it soon aborts
// ("corrupted size vs. prev_size") and the session is lost
// (TestGreenEndHandleLimit). A client must never hold more.
const GreenEndMaxHandles = 128

// extra is what a Server of this file has beyond the shared fields.
type extra struct {
	root     string // the local directory the client sees as "/"
	statsDir string // sftpcount's stats, for StartGreenEnd
}

var extras sync.Map // *Server -> *extra

func setExtra(t testing.TB, s *Server, e *extra) {
	extras.Store(s, e)
	t.Cleanup(func() { extras.Delete(s) })
}

func getExtra(s *Server) *extra {
	if e, ok := extras.Load(s); ok {
		return e.(*extra)
	}
	return nil
}

// Root is the local directory that the server's SFTP clients see as "/":
// the chroot of StartOpenSSHChroot, "/" for every other server. A test
// builds its "remote" tree under Root and names it to the client with
// ClientPath.
func (s *Server) Root() string {
	if e := getExtra(s); e != nil && e.root != "" {
		return e.root
	}
	return "/"
}

// ClientPath is the path a client of this server uses for the local path
// p, which must lie under Root.
func (s *Server) ClientPath(p string) string {
	root := s.Root()
	if root == "/" {
		return p
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		panic(fmt.Sprintf("sshdtest: %s is not under the server's root %s", p, root))
	}
	if rel == "." {
		return "/"
	}
	return "/" + filepath.ToSlash(rel)
}

// HandleStats is what sftpcount counted for StartGreenEnd's server.
type HandleStats struct {
	Sessions     int // SFTP sessions started so far
	Peak         int // the most handles one session held open at once
	Current      int // handles open now, all sessions together
	Opens        int // OPEN/OPENDIR answered with a handle
	Closes       int // CLOSE answered with STATUS OK
	FailedOpens  int // OPEN/OPENDIR answered with an error
	FailedCloses int // CLOSE answered with an error
}

// Handles reads the handle counts of a StartGreenEnd server (all zero for
// any other). Each SFTP session is its own gesftpserver process, so the
// limit GreenEndMaxHandles applies to Peak, the largest of the sessions'
// peaks. A handle a client has been given is always counted by then.
func (s *Server) Handles(t testing.TB) HandleStats {
	t.Helper()
	var hs HandleStats
	e := getExtra(s)
	if e == nil || e.statsDir == "" {
		return hs
	}
	files, err := filepath.Glob(filepath.Join(e.statsDir, "*.stats"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("sshdtest: handle counter: %v", err)
		}
		v := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			k, n, ok := strings.Cut(line, " ")
			i, err := strconv.Atoi(n)
			if !ok || err != nil {
				t.Fatalf("sshdtest: handle counter %s: bad line %q", f, line)
			}
			v[k] = i
		}
		hs.Sessions++
		hs.Peak = max(hs.Peak, v["peak"])
		hs.Current += v["current"]
		hs.Opens += v["opens"]
		hs.Closes += v["closes"]
		hs.FailedOpens += v["failed_opens"]
		hs.FailedCloses += v["failed_closes"]
	}
	return hs
}

// PeakHandles is Handles(t).Peak.
func (s *Server) PeakHandles(t testing.TB) int { return s.Handles(t).Peak }

// ---------------------------------------------------------------------------
// OpenSSH variants.

// StartGreenEnd runs OpenSSH's sshd (as StartOpenSSH does, Options.SFTPOnly
// and Options.Restrict included) with Green End's gesftpserver as its sftp
// subsystem, behind sftpcount (built from ./sftpcount into the test's
// temporary directory), which counts the open handles of every session
// exactly: see Server.Handles.
func StartGreenEnd(t testing.TB, opts Options) *Server {
	t.Helper()
	need(t, "gesftpserver", GreenEndPath)
	dir := t.TempDir()
	counter := filepath.Join(dir, "sftpcount")
	buildCounter(t, counter)
	stats := filepath.Join(dir, "stats")
	if err := os.Mkdir(stats, 0o755); err != nil {
		t.Fatal(err)
	}
	subsystem := fmt.Sprintf("%s -stats %s -- %s", counter, stats, GreenEndPath)
	if opts.SFTPOnly {
		// ForceCommand would run internal-sftp, not gesftpserver.
		t.Fatalf("sshdtest: StartGreenEnd does not take SFTPOnly (ForceCommand internal-sftp bypasses gesftpserver)")
	}
	if opts.Restrict {
		t.Fatalf("sshdtest: StartGreenEnd does not take Restrict (its command=\"internal-sftp\" bypasses gesftpserver)")
	}
	srv := startSSHD(t, "gesftpserver", opts, "Subsystem sftp "+subsystem+"\n", func() string {
		return "sftpcount stats:\n" + statsText(stats)
	})
	setExtra(t, srv, &extra{statsDir: stats})
	return srv
}

// StartOpenSSHChroot runs OpenSSH's sshd with ForceCommand internal-sftp
// and ChrootDirectory, so that its SFTP clients see Root as "/". sshd
// wants every component of a chroot's path owned by root and writable by
// nobody else, which rules out the temporary directory (/tmp is 1777): the
// chroot is a fresh directory under /run, removed when the test ends. Only
// root can run it.
func StartOpenSSHChroot(t testing.TB, opts Options) *Server {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "a chrooted sshd needs root")
	}
	root, err := os.MkdirTemp("/run", "handoff-sshdtest-chroot-")
	if err != nil {
		skipOrFail(t, fmt.Sprintf("cannot make a chroot directory: %v", err))
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := checkChrootPath(root); err != nil {
		skipOrFail(t, err.Error())
	}
	tail := fmt.Sprintf("ChrootDirectory %s\nForceCommand internal-sftp\n", root)
	srv := startSSHD(t, "chroot", opts, "Subsystem sftp internal-sftp\n"+tail, nil)
	setExtra(t, srv, &extra{root: root})
	return srv
}

// checkChrootPath reports why sshd would refuse dir as a ChrootDirectory.
func checkChrootPath(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			return fmt.Errorf("chroot %s: %s must be owned by root and writable by nobody else (%v)", dir, p, fi.Mode())
		}
		if p == "/" {
			return nil
		}
	}
}

// startSSHD is StartOpenSSH with its Subsystem line replaced by sub (which
// may add more directives). more, if set, adds to the log shown when the
// test fails.
func startSSHD(t testing.TB, what string, opts Options, sub string, more func() string) *Server {
	t.Helper()
	need(t, "OpenSSH server", SSHDPath)
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		skipOrFail(t, fmt.Sprintf("cannot create /run/sshd for sshd: %v", err))
	}
	dir := t.TempDir()
	srv := &Server{User: currentUser(t).Username}
	newClientKey(t, srv, dir)
	edPath, ecPath := writeHostKeys(t, srv, dir, false)

	authLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(srv.ClientKey)))
	if opts.Restrict {
		authLine = `restrict,command="internal-sftp" ` + authLine
	}
	authKeys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authKeys, []byte(authLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	confPath := filepath.Join(dir, "sshd_config")
	port := startWithRetry(t, what, func(port int) *exec.Cmd {
		conf := sshdConfig(port, dir, edPath, ecPath, authKeys, opts)
		const std = "Subsystem sftp internal-sftp\n"
		if !strings.Contains(conf, std) {
			t.Fatalf("sshdtest: sshdConfig no longer says %q", std)
		}
		conf = strings.Replace(conf, std, sub, 1)
		if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		return exec.Command(SSHDPath, "-D", "-e", "-f", confPath)
	}, more)
	srv.finish(t, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	return srv
}

// buildCounter builds ./sftpcount into out.
func buildCounter(t testing.TB, out string) {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("sshdtest: cannot find my own source")
	}
	cmd := exec.Command("go", "build", "-o", out, "./sftpcount")
	cmd.Dir = filepath.Dir(self)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sshdtest: building sftpcount: %v\n%s", err, b)
	}
}

func statsText(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.stats"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "%s: %s\n", filepath.Base(f), strings.ReplaceAll(strings.TrimSpace(string(data)), "\n", ", "))
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range logs {
		if data, _ := os.ReadFile(f); len(data) > 0 {
			fmt.Fprintf(&b, "%s:\n%s\n", filepath.Base(f), data)
		}
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// Shared pieces.

// need skips or fails the test when path is missing.
func need(t testing.TB, what, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		skipOrFail(t, fmt.Sprintf("%s not available (%v)", what, err))
	}
}

// newClientKey makes the client key srv accepts and writes it to
// srv.IdentityFile.
func newClientKey(t testing.TB, srv *Server, dir string) {
	t.Helper()
	client, clientPriv := NewEd25519(t)
	srv.ClientKey = client.PublicKey()
	srv.IdentityFile = filepath.Join(dir, "id_ed25519")
	WritePrivateKey(t, srv.IdentityFile, clientPriv, "")
}

// writeHostKeys writes an ed25519 and an ECDSA P-256 host key in OpenSSH
// format (the ECDSA one as a PEM "EC PRIVATE KEY" when ecPEM is set) and
// records their public halves in srv.HostKeys, ed25519 first.
func writeHostKeys(t testing.TB, srv *Server, dir string, ecPEM bool) (edPath, ecPath string) {
	t.Helper()
	_, edPriv := NewEd25519(t)
	_, ecPriv := newECDSA(t)
	edPath = filepath.Join(dir, "ssh_host_ed25519_key")
	ecPath = filepath.Join(dir, "ssh_host_ecdsa_key")
	WritePrivateKey(t, edPath, edPriv, "")
	WritePrivateKey(t, ecPath, ecPriv, "")
	if ecPEM {
		der, err := x509.MarshalECPrivateKey(ecPriv)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ecPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{edPath, ecPath} {
		srv.HostKeys = append(srv.HostKeys, readPub(t, p+".pub"))
	}
	return edPath, ecPath
}

// startWithRetry starts the server command made for a free port, waits for
// its SSH banner, and arranges for it (its whole process group) to stop
// when the test ends, showing its output and the files more describes if
// the test failed. It tries three ports: another process may take a free
// port before the server binds it.
func startWithRetry(t testing.TB, what string, command func(port int) *exec.Cmd, more func() string) int {
	t.Helper()
	var lastErr error
	for try := 0; try < 3; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		cmd := command(port)
		d, err := startDaemon(what, cmd)
		if err != nil {
			skipOrFail(t, fmt.Sprintf("cannot start %s: %v", what, err))
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := waitBanner(addr, d.exited, 10*time.Second); err != nil {
			d.stop()
			lastErr = fmt.Errorf("%v; it said:\n%s%s", err, d.log.String(), moreText(more))
			continue
		}
		t.Cleanup(func() {
			d.stop()
			if t.Failed() {
				t.Logf("%s output:\n%s%s", what, d.log.String(), moreText(more))
			}
		})
		return port
	}
	t.Fatalf("sshdtest: %s did not start: %v", what, lastErr)
	return 0
}

func moreText(more func() string) string {
	if more == nil {
		return ""
	}
	return more()
}

// daemon is a server process and its collected output.
type daemon struct {
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan error
	once   sync.Once
}

// startDaemon starts cmd in a process group of its own, collecting its
// output unless cmd already sends it elsewhere.
func startDaemon(what string, cmd *exec.Cmd) (*daemon, error) {
	d := &daemon{cmd: cmd, log: &syncBuffer{}, exited: make(chan error, 1)}
	if cmd.Stdout == nil {
		cmd.Stdout = d.log
	}
	if cmd.Stderr == nil {
		cmd.Stderr = d.log
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	go func() { d.exited <- cmd.Wait() }()
	return d, nil
}

// stop ends the server: its process group and every process descended
// from it (sshd and Dropbear put each session in a session of its own,
// out of the group), SIGTERM first, SIGKILL to whatever is left after 5s.
// It returns once they are all gone, so that none of them writes into a
// temporary directory the test is about to remove.
func (d *daemon) stop() {
	d.once.Do(func() {
		leader := d.cmd.Process.Pid
		kids := descendants(leader)
		syscall.Kill(-leader, syscall.SIGTERM)
		for _, p := range kids {
			p.signal(syscall.SIGTERM)
		}
		deadline := time.After(5 * time.Second)
		select {
		case <-d.exited:
		case <-deadline:
			syscall.Kill(-leader, syscall.SIGKILL)
			<-d.exited
		}
		// Whatever of the group outlived its leader.
		syscall.Kill(-leader, syscall.SIGKILL)
		for _, p := range kids {
			for p.alive() {
				select {
				case <-deadline:
					p.signal(syscall.SIGKILL)
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	})
}

// proc is a process, told from a later one with the same pid by its start
// time.
type proc struct {
	pid   int
	start string
}

// procStat is /proc/pid/stat's fields after "pid (comm)": state, ppid, …
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	// comm may hold spaces and parentheses: it ends at the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// alive reports whether p still runs (and is not a zombie).
func (p proc) alive() bool {
	f := procStat(p.pid)
	return len(f) > 19 && f[19] == p.start && f[0] != "Z"
}

func (p proc) signal(sig syscall.Signal) {
	if p.alive() {
		syscall.Kill(p.pid, sig)
	}
}

// descendants lists the processes below pid.
func descendants(pid int) []proc {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]proc{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(p)
		if len(f) <= 19 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], proc{p, f[19]})
		}
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// readFirstLine reads one line from r within d, or fails.
func readFirstLine(r *bufio.Reader, within time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := r.ReadString('\n')
		ch <- res{s, err}
	}()
	select {
	case x := <-ch:
		return strings.TrimSpace(x.s), x.err
	case <-time.After(within):
		return "", fmt.Errorf("nothing within %v", within)
	}
}
