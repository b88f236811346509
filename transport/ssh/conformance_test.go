package ssh

import (
	"testing"

	"github.com/handoff-sync/handoff/internal/sshdtest"
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
