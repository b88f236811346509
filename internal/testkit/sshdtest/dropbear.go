package sshdtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"
)

// StartDropbear runs Dropbear (dropbear -F -E) on a free 127.0.0.1 port
// with ed25519 and ECDSA P-256 host keys made by dropbearkey, public-key
// logins only (-s), no port forwarding (-j -k). Its "sftp" subsystem is
// what Debian's Dropbear is built to run, /usr/lib/sftp-server (OpenSSH's,
// from openssh-sftp-server).
//
// Dropbear 2022.83 has no option naming an authorized_keys file: it reads
// ~/.ssh/authorized_keys of the login, the home directory taken from the
// password database. So that the test user's real ~/.ssh is never
// touched, Dropbear runs in a mount namespace of its own in which
// /etc/passwd is a copy whose entry for the user names a home directory
// in the test's temporary directory, holding the generated client key.
// Only Dropbear and its sessions see that copy.
func StartDropbear(t testing.TB, opts Options) *Server {
	t.Helper()
	need(t, "Dropbear", DropbearPath)
	need(t, "dropbearkey", DropbearKeygen)
	need(t, "OpenSSH's sftp-server for Dropbear", DropbearSFTP)
	if os.Geteuid() != 0 {
		skipOrFail(t, "Dropbear's tests run it as root (it swaps /etc/passwd in a mount namespace)")
	}
	dir := t.TempDir()
	u := currentUser(t)
	srv := &Server{User: u.Username}
	newClientKey(t, srv, dir)

	var keys []string
	for _, kt := range []struct{ typ, bits string }{{"ed25519", ""}, {"ecdsa", "256"}} {
		p := filepath.Join(dir, "dropbear_"+kt.typ+"_host_key")
		args := []string{"-t", kt.typ, "-f", p}
		if kt.bits != "" {
			args = append(args, "-s", kt.bits)
		}
		if out, err := exec.Command(DropbearKeygen, args...).CombinedOutput(); err != nil {
			t.Fatalf("sshdtest: dropbearkey %v: %v\n%s", args, err, out)
		}
		srv.HostKeys = append(srv.HostKeys, dropbearPublic(t, p))
		keys = append(keys, p)
	}

	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh/authorized_keys"), ssh.MarshalAuthorizedKey(srv.ClientKey), 0o600); err != nil {
		t.Fatal(err)
	}
	passwd := filepath.Join(dir, "passwd")
	writePasswdWithHome(t, passwd, u.Username, home)

	port := startWithRetry(t, "dropbear", func(port int) *exec.Cmd {
		args := []string{"-F", "-E", "-s", "-j", "-k", "-m",
			"-p", fmt.Sprintf("127.0.0.1:%d", port), "-P", filepath.Join(dir, "dropbear.pid")}
		for _, k := range keys {
			args = append(args, "-r", k)
		}
		script := `mount --bind "$PASSWD" /etc/passwd || exit 1; exec "$@"`
		cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh", DropbearPath}, args...)...)
		cmd.Env = append(os.Environ(), "PASSWD="+passwd)
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		return cmd
	}, nil)
	srv.finish(t, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	return srv
}

// dropbearPublic is the public half of a Dropbear host key, as dropbearkey
// -y prints it.
func dropbearPublic(t testing.TB, keyPath string) ssh.PublicKey {
	t.Helper()
	out, err := exec.Command(DropbearKeygen, "-y", "-f", keyPath).CombinedOutput()
	if err != nil {
		t.Fatalf("sshdtest: dropbearkey -y: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "ssh-") || strings.HasPrefix(line, "ecdsa-") {
			pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
			if err != nil {
				t.Fatalf("sshdtest: dropbearkey -y printed %q: %v", line, err)
			}
			return pub
		}
	}
	t.Fatalf("sshdtest: dropbearkey -y printed no public key:\n%s", out)
	return nil
}

// writePasswdWithHome writes a copy of /etc/passwd to path in which user's
// home directory is home.
func writePasswdWithHome(t testing.TB, path, user, home string) {
	t.Helper()
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	found := false
	for i, line := range lines {
		f := strings.Split(line, ":")
		if len(f) == 7 && f[0] == user {
			f[5] = home
			lines[i] = strings.Join(f, ":")
			found = true
		}
	}
	if !found {
		t.Fatalf("sshdtest: %s has no line in /etc/passwd for Dropbear to log in as", user)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
