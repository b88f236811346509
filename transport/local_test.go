package transport_test

import (
	"testing"

	"github.com/handoff-sync/handoff/transport"
	"github.com/handoff-sync/handoff/transport/transporttest"
)

func TestLocalConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) (transport.FS, string) {
		return transport.NewLocal(), t.TempDir()
	})
}
