// Package e2e drives the built handoff binary: CLI scripts (testscript),
// crash recovery through failpoints, and concurrent runs. Later suites start
// real OpenSSH servers.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binDir holds the handoff binary built once for the whole package.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "handoff-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "handoff"), "github.com/handoff-sync/handoff/cmd/handoff")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building handoff:", err)
		return 1
	}
	binDir = dir
	// The binary reads OpenClaw's config where OpenClaw would; the tests
	// must not see this machine's. The OpenClaw tests name their own.
	if os.Getenv("OPENCLAW_CONFIG_PATH") == "" {
		os.Setenv("OPENCLAW_CONFIG_PATH", filepath.Join(dir, "no-openclaw.json"))
	}
	return m.Run()
}

// binary is the path of the built handoff.
func binary() string { return filepath.Join(binDir, "handoff") }
