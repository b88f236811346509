package sshdtest

import (
	"encoding/base64"
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

// guardedFiles are system files that a server run in a mount namespace of
// its own (StartProFTPD) sees as mount points: rename(2) and unlink(2) of
// a mount point fail with EBUSY, so a client that a symlink-following
// server misleads cannot move or delete them (tests point symlinks at
// /etc/passwd). Nothing outside that server's namespace is affected.
var guardedFiles = []string{"/etc/passwd", "/etc/group", "/etc/shadow"}

// StartProFTPD runs ProFTPD 1.3.8 in the foreground (proftpd -n -c conf,
// as root) with mod_sftp loaded from /usr/lib/proftpd and SFTP only, on a
// free 127.0.0.1 port: ed25519 (OpenSSH format) and ECDSA P-256 (PEM) host
// keys, public-key authentication only against SFTPAuthorizedUserKeys (the
// client key in RFC 4716 format), RootLogin on, RequireValidShell off, no
// PAM, no /etc/ftpusers, no chroot (paths are the local file system's).
// Its logs (system, mod_sftp) are shown when the test fails.
//
// ProFTPD's SFTP resolves symlinks in the paths it is given: LSTAT
// reports a symlink's target, RENAME moves the target (see
// TestProFTPDFollowsSymlinks). As a safety net the server runs in a mount
// namespace of its own in which guardedFiles are bind-mounted onto
// themselves, so that no test can lose them through it.
func StartProFTPD(t testing.TB, opts Options) *Server {
	t.Helper()
	need(t, "ProFTPD", ProFTPDPath)
	need(t, "ProFTPD's mod_sftp", ProFTPDModSFTP)
	if os.Geteuid() != 0 {
		skipOrFail(t, "ProFTPD's tests run it as root")
	}
	dir := t.TempDir()
	srv := &Server{User: currentUser(t).Username}
	newClientKey(t, srv, dir)
	edPath, ecPath := writeHostKeys(t, srv, dir, true)
	authKeys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authKeys, []byte(rfc4716(srv.ClientKey, "handoff-test")), 0o600); err != nil {
		t.Fatal(err)
	}
	sysLog := filepath.Join(dir, "system.log")
	sftpLog := filepath.Join(dir, "sftp.log")
	confPath := filepath.Join(dir, "proftpd.conf")
	var guard []string
	for _, f := range guardedFiles {
		if _, err := os.Stat(f); err == nil {
			guard = append(guard, f)
		}
	}
	port := startWithRetry(t, "proftpd", func(port int) *exec.Cmd {
		conf := fmt.Sprintf(`# sshdtest: ProFTPD as an SFTP server only
ServerType standalone
ServerName "sshdtest"
DefaultServer on
UseIPv6 off
DefaultAddress 127.0.0.1
SocketBindTight on
Port %d
PidFile %s
ScoreboardFile %s
SystemLog %s
TransferLog none
WtmpLog off
DelayEngine off
UseReverseDNS off
CapabilitiesEngine off
AuthPAM off
AuthOrder mod_auth_unix.c
UseFtpUsers off
RootLogin on
RequireValidShell off
AllowOverwrite on
Umask 022
ModulePath %s
LoadModule mod_sftp.c
SFTPEngine on
SFTPLog %s
SFTPHostKey %s
SFTPHostKey %s
SFTPAuthorizedUserKeys file:%s
SFTPAuthMethods publickey
SFTPCompression off
`, port, filepath.Join(dir, "proftpd.pid"), filepath.Join(dir, "scoreboard"), sysLog,
			filepath.Dir(ProFTPDModSFTP), sftpLog, edPath, ecPath, authKeys)
		if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		// sh bind-mounts each guarded file onto itself, then becomes
		// proftpd; Go makes the new namespace's mounts private first.
		script := `for f in $GUARD; do mount --bind "$f" "$f" || exit 1; done; exec "$@"`
		cmd := exec.Command("/bin/sh", "-c", script, "sh", ProFTPDPath, "-n", "-c", confPath)
		cmd.Env = append(os.Environ(), "GUARD="+strings.Join(guard, " "))
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		return cmd
	}, func() string {
		return logFile("system.log", sysLog) + logFile("sftp.log", sftpLog)
	})
	srv.finish(t, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	return srv
}

// rfc4716 is key as an RFC 4716 public key file (what ssh-keygen -e
// writes), the one format ProFTPD's SFTPAuthorizedUserKeys reads.
func rfc4716(key ssh.PublicKey, comment string) string {
	var b strings.Builder
	b.WriteString("---- BEGIN SSH2 PUBLIC KEY ----\n")
	fmt.Fprintf(&b, "Comment: \"%s\"\n", comment)
	enc := base64.StdEncoding.EncodeToString(key.Marshal())
	for len(enc) > 70 {
		b.WriteString(enc[:70] + "\n")
		enc = enc[70:]
	}
	b.WriteString(enc + "\n---- END SSH2 PUBLIC KEY ----\n")
	return b.String()
}

// logFile is a server's log file, headed by its name, for a failure
// report (its last 64 KiB).
func logFile(name, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("--- %s: %v\n", name, err)
	}
	if len(b) > 64<<10 {
		b = b[len(b)-64<<10:]
	}
	return fmt.Sprintf("--- %s:\n%s\n", name, b)
}
