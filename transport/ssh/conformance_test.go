package ssh

import (
	"testing"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/transport"
	"github.com/handoff-sync/handoff/transport/transporttest"
)

// factory dials srv afresh for each subtest; the fixture directory is a
// local temporary directory, which the SFTP server sees at the same path.
func factory(srv *sshdtest.Server) transporttest.Factory {
	return func(t *testing.T) (transport.FS, string) {
		return dialT(t, configFor(srv)), t.TempDir()
	}
}

func TestConformanceEmbedded(t *testing.T) {
	t.Parallel()
	transporttest.Run(t, factory(sshdtest.StartEmbedded(t, sshdtest.Options{})))
}

// Real OpenSSH: a normal account, a ForceCommand internal-sftp account and a
// restrict,command="internal-sftp" key. Nothing may need a remote shell.
func TestConformanceOpenSSH(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts sshdtest.Options
	}{
		{"normal", sshdtest.Options{}},
		{"forcecommand-internal-sftp", sshdtest.Options{SFTPOnly: true}},
		{"restrict-internal-sftp", sshdtest.Options{Restrict: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			transporttest.Run(t, factory(sshdtest.StartOpenSSH(t, tc.opts)))
		})
	}
}

// SFTP servers other than OpenSSH's own, where the contract applies as it
// stands: Green End's (behind sshd), OpenSSH's sftp-server behind Dropbear,
// and AsyncSSH's. (ProFTPD's mod_sftp is left out: its LSTAT follows
// symlinks, which the contract forbids and claim guards against, see
// claim/symlinks.go; a chrooted account sees other paths than the test.)
func TestConformanceOtherServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(testing.TB, sshdtest.Options) *sshdtest.Server
	}{
		{"gesftpserver", sshdtest.StartGreenEnd},
		{"dropbear", sshdtest.StartDropbear},
		{"asyncssh", sshdtest.StartAsyncSSH},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			transporttest.Run(t, factory(tc.start(t, sshdtest.Options{})))
		})
	}
}
