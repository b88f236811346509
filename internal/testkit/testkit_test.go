package testkit

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestNothingThatShipsImportsTheTestKit lists every package of the module
// with the imports of its non-test files and fails for each package outside
// internal/testkit that imports one inside it. A test may import the kit
// (its _test.go imports are not listed); a product package may not.
func TestNothingThatShipsImportsTheTestKit(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is not on PATH (go test puts GOROOT/bin there): %v", err)
	}
	module := strings.TrimSpace(string(run(t, goTool, "list", "-m")))
	kit := module + "/internal/testkit"
	out := run(t, goTool, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...")

	inKit := func(path string) bool { return path == kit || strings.HasPrefix(path, kit+"/") }
	var listed, kitListed int
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		listed++
		pkg := fields[0]
		if inKit(pkg) {
			kitListed++
			continue
		}
		for _, imp := range fields[1:] {
			if inKit(imp) {
				t.Errorf("%s imports %s: nothing that ships may import the test kit; move the code that needs it into a _test.go file or under internal/testkit", pkg, imp)
			}
		}
	}
	// A listing that saw neither side would let this test pass without
	// looking at anything.
	if listed == kitListed || kitListed < 2 {
		t.Fatalf("go list saw %d packages, %d of them in the test kit: the listing is not the module's", listed, kitListed)
	}
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}
