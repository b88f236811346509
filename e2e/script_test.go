package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the CLI scripts in testdata/*.txtar against the built
// binary. HOME is the script's work directory, so manifests say ~/ws.
// FIXTURES is testdata/fixtures, trees too big or too binary for a txtar
// (a workspace an earlier handoff wrote), which scripts copy from.
func TestScripts(t *testing.T) {
	fixtures, err := filepath.Abs(filepath.Join("testdata", "fixtures"))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata",
		RequireExplicitExec: true,
		Cmds:                scriptCmds,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			env.Setenv("FIXTURES", fixtures)
			env.Values[scriptT{}] = env.T()
			return nil
		},
	})
}
