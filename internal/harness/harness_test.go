package harness_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/handoff-sync/handoff/internal/harness"
	"github.com/handoff-sync/handoff/internal/harness/claude"
	"github.com/handoff-sync/handoff/internal/harness/codex"
)

const program = "/opt/handoff/bin/handoff"

// schema compiles one of the vendored SchemaStore schemas.
func schema(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "schemastore", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(file, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(file)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, what string, data []byte) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, data)
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("%s does not validate against the published schema: %v\n%s", what, err, data)
	}
}

func decode(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode: %v\n%s", err, data)
	}
	return v
}

type harnessCase struct {
	name    string
	schema  string
	fixture string
	hooks   []harness.Hook
}

func cases() []harnessCase {
	return []harnessCase{
		{"claude", "claude-code-settings.json", "claude-settings.json", claude.Hooks(program)},
		{"codex", "codex-hooks.json", "codex-hooks.json", codex.Hooks(program)},
	}
}

// TestInstallMerges: install into a file a person keeps (other hooks on
// the same events, permissions, unknown keys, escapes and number forms)
// validates against the published schema, holds handoff's two hooks as
// current, and keeps every other member byte for byte: uninstalling
// gives back exactly the file before install. Install twice is install
// once (the second changes nothing).
func TestInstallMerges(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			s := schema(t, tc.schema)
			before, err := os.ReadFile(filepath.Join("testdata", tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			validate(t, s, "the fixture", before)
			once, changed, err := harness.Install(before, tc.hooks)
			if err != nil || !changed {
				t.Fatalf("install: changed %v, %v", changed, err)
			}
			validate(t, s, "the installed file", once)
			_, states, err := harness.Inspect(once, tc.hooks)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tc.hooks {
				if states[h.Kind] != harness.StateCurrent {
					t.Errorf("%s: %s after install", h.Kind, states[h.Kind])
				}
			}
			for _, keep := range []string{"echo hello from the person", "prettier --write", "notify-send done", `"\u00e9t\u00e9"`, "2.50", "guard.py", "session_start.py"} {
				if bytes.Contains(before, []byte(keep)) && !bytes.Contains(once, []byte(keep)) {
					t.Errorf("install lost %s:\n%s", keep, once)
				}
			}
			twice, changed, err := harness.Install(once, tc.hooks)
			if err != nil || changed || !bytes.Equal(twice, once) {
				t.Errorf("a second install changed the file (changed %v, %v):\n%s", changed, err, twice)
			}
			after, changed, empty, err := harness.Uninstall(once)
			if err != nil || !changed || empty {
				t.Fatalf("uninstall: changed %v empty %v, %v", changed, empty, err)
			}
			if !bytes.Equal(after, before) {
				t.Errorf("uninstall did not give back the file before install:\n--- before\n%s\n--- after\n%s", before, after)
			}
			if !reflect.DeepEqual(decode(t, after), decode(t, before)) {
				t.Error("uninstall changed the file's meaning")
			}
		})
	}
}

// TestInstallKeepsMeaningInAnyLayout: a file laid out by hand (tabs, one
// line, no final newline) comes back from install + uninstall equal in
// meaning, key order included, with its indent unit and final newline.
// The one documented exception: an empty "hooks" object that install
// filled is gone after uninstall (no hooks either way).
func TestInstallKeepsMeaningInAnyLayout(t *testing.T) {
	for before, want := range map[string]string{
		"{\n\t\"model\": \"opus\",\n\t\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"true\"}]}]},\n\t\"z\": [ ]\n}": "",
		`{"permissions":{"allow":["Bash(ls)"]},"hooks":{}}`: `{"permissions":{"allow":["Bash(ls)"]}}`,
	} {
		if want == "" {
			want = before
		}
		once, _, err := harness.Install([]byte(before), claude.Hooks(program))
		if err != nil {
			t.Fatal(err)
		}
		validate(t, schema(t, "claude-code-settings.json"), "the installed file", once)
		after, _, _, err := harness.Uninstall(once)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(decode(t, after), decode(t, []byte(want))) {
			t.Errorf("meaning changed:\n%s\n---\n%s", before, after)
		}
		if strings.HasPrefix(before, "{\n\t") && !strings.HasPrefix(string(after), "{\n\t\"model\"") {
			t.Errorf("the tab indent or the key order was not kept:\n%s", after)
		}
		if strings.HasSuffix(string(after), "\n") != strings.HasSuffix(before, "\n") {
			t.Errorf("the final newline changed:\n%q", after)
		}
	}
}

// TestInstallNewFile: into no file, install writes just handoff's hooks,
// valid for each harness; uninstall then leaves nothing, so the caller
// removes the file install created.
func TestInstallNewFile(t *testing.T) {
	for _, tc := range cases() {
		out, changed, err := harness.Install(nil, tc.hooks)
		if err != nil || !changed {
			t.Fatalf("%s: %v", tc.name, err)
		}
		validate(t, schema(t, tc.schema), tc.name+" new file", out)
		_, _, empty, err := harness.Uninstall(out)
		if err != nil || !empty {
			t.Errorf("%s: uninstall of a file install created: empty %v, %v", tc.name, empty, err)
		}
	}
}

// TestInstallReplacesOutdated: an older install (another program path,
// inside a group it shares with the person's hook) and a duplicate are
// replaced by one current hook each; the person's hook stays where it
// was.
func TestInstallReplacesOutdated(t *testing.T) {
	before := `{"hooks":{"SessionStart":[{"matcher":"startup","hooks":[` +
		`{"type":"command","command":"echo mine"},` +
		`{"type":"command","command":"/old/path/handoff context --hook claude"}]}],` +
		`"Stop":[{"hooks":[{"type":"command","command":"handoff hook stop --harness claude"}]},` +
		`{"hooks":[{"type":"command","command":"'/other path/handoff' hook stop --harness claude"}]}]}}`
	found, states, err := harness.Inspect([]byte(before), claude.Hooks(program))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 3 || states[harness.KindContext] != harness.StateOutdated || states[harness.KindStop] != harness.StateOutdated {
		t.Fatalf("found %+v, states %v", found, states)
	}
	if found[2].Program != "/other path/handoff" {
		t.Errorf("quoted program read as %q", found[2].Program)
	}
	out, changed, err := harness.Install([]byte(before), claude.Hooks(program))
	if err != nil || !changed {
		t.Fatal(err)
	}
	validate(t, schema(t, "claude-code-settings.json"), "the file", out)
	found, states, _ = harness.Inspect(out, claude.Hooks(program))
	if len(found) != 2 || states[harness.KindContext] != harness.StateCurrent || states[harness.KindStop] != harness.StateCurrent {
		t.Errorf("after install: found %+v, states %v\n%s", found, states, out)
	}
	if !strings.Contains(string(out), `"matcher": "startup",`+"\n"+`        "hooks": [`+"\n"+`          {`+"\n"+`            "type": "command",`+"\n"+`            "command": "echo mine"`) {
		t.Errorf("the person's hook moved or changed:\n%s", out)
	}
}

// TestRefuses: a file that is not a JSON object, whose hooks is not an
// object, whose event is not a list, or with a key twice, is refused and
// never rewritten (the invariant: handoff never guesses at a person's
// file).
func TestRefuses(t *testing.T) {
	for _, bad := range []string{`[]`, `{"a":1} {"b":2}`, `{"hooks":[]}`, `{"hooks":{"Stop":{}}}`, `{"hooks":{},"hooks":{}}`, `{"a":1,}`, `// comment` + "\n{}"} {
		if _, _, err := harness.Install([]byte(bad), claude.Hooks(program)); !harness.IsSyntax(err) {
			t.Errorf("install of %s: %v, want a syntax refusal", bad, err)
		}
		if _, _, _, err := harness.Uninstall([]byte(bad)); !harness.IsSyntax(err) {
			t.Errorf("uninstall of %s: %v, want a syntax refusal", bad, err)
		}
	}
}

// TestKindOf: only a handler that runs a program named handoff with one
// of its hook subcommands, and nothing a shell would expand or chain, is
// handoff's; uninstall never removes anything else.
func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		cmd, kind, prog string
	}{
		{"/usr/local/bin/handoff context --hook claude", harness.KindContext, "/usr/local/bin/handoff"},
		{"handoff context --mirror /m --hook codex", harness.KindContext, "handoff"},
		{"'/a b/handoff' hook stop --harness codex", harness.KindStop, "/a b/handoff"},
		{`"/a b/handoff" hook stop`, harness.KindStop, "/a b/handoff"},
		{`/a\ b/handoff hook stop`, harness.KindStop, "/a b/handoff"},
		{"handoff context", "", ""},
		{"handoff sync", "", ""},
		{"handoff-old context --hook claude", "", ""},
		{"handoff context --hook claude; rm -rf ~", "", ""},
		{"handoff context --hook claude && echo", "", ""},
		{"$(which handoff) context --hook claude", "", ""},
		{"echo handoff context --hook claude", "", ""},
		{"'unterminated handoff hook stop", "", ""},
	} {
		kind, prog := harness.KindOf(tc.cmd)
		if kind != tc.kind || prog != tc.prog {
			t.Errorf("KindOf(%q) = %q, %q; want %q, %q", tc.cmd, kind, prog, tc.kind, tc.prog)
		}
	}
	if kind, prog := harness.KindOf("/opt/hf context --hook claude", "/opt/hf"); kind != harness.KindContext || prog != "/opt/hf" {
		t.Errorf("the binary install names, under another name: %q %q", kind, prog)
	}
	if kind, _ := harness.KindOf("/opt/other context --hook claude", "/opt/hf"); kind != "" {
		t.Error("another program under another name counted as handoff's")
	}
	for _, p := range []string{"/usr/bin/handoff", "/home/me/my tools/handoff", "/x/it's/handoff", "/x/$HOME/handoff"} {
		words, ok := harness.Split(harness.Command(p, "hook", "stop"))
		if !ok || words[0] != p {
			t.Errorf("Command(%q) splits back to %q (%v)", p, words, ok)
		}
	}
}

// TestTargetFile: install through a Target writes the file atomically
// with a backup of its prior content, keeps its mode, edits a symlink's
// target (not the link), and a dry run writes nothing; status follows;
// uninstall of a file install created removes it.
func TestTargetFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CODEX_HOME", "")
	state := filepath.Join(home, "state")
	dotfiles := filepath.Join(home, "dotfiles", "settings.json")
	before := []byte("{\n  \"model\": \"opus\"\n}\n")
	if err := os.MkdirAll(filepath.Dir(dotfiles), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dotfiles, before, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(home, ".claude", "settings.json")
	if err := os.Symlink(dotfiles, link); err != nil {
		t.Fatal(err)
	}
	tg, err := claude.Target(harness.ScopeUser, "", program)
	if err != nil || tg.Path != link {
		t.Fatalf("target %s, %v", tg.Path, err)
	}
	if st := tg.Status(); st.State != harness.StateAbsent || !st.Exists {
		t.Errorf("status before: %+v", st)
	}
	c, err := tg.Install(state, true)
	if err != nil || !c.Changed || c.Diff == "" || !strings.Contains(c.Diff, "+") {
		t.Fatalf("dry run: %+v, %v", c, err)
	}
	if got, _ := os.ReadFile(dotfiles); !bytes.Equal(got, before) {
		t.Fatal("a dry run wrote the file")
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Error("a dry run made a backup")
	}
	c, err = tg.Install(state, false)
	if err != nil || !c.Changed || c.Target != dotfiles {
		t.Fatalf("install: %+v, %v", c, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced by a file")
	}
	if fi, _ := os.Stat(dotfiles); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	if b, err := os.ReadFile(c.Backup); err != nil || !bytes.Equal(b, before) {
		t.Errorf("backup %s: %q, %v", c.Backup, b, err)
	}
	if st := tg.Status(); st.State != harness.StateOutdated {
		// The program does not exist on this machine: a current file
		// naming a missing program is outdated.
		t.Errorf("status naming a missing program: %+v", st)
	}
	if c, err := tg.Uninstall(state, false); err != nil || !c.Changed || c.Removed {
		t.Fatalf("uninstall: %+v, %v", c, err)
	}
	if got, _ := os.ReadFile(dotfiles); !bytes.Equal(got, before) {
		t.Errorf("uninstall left %q, want %q", got, before)
	}

	// Codex: no file before; install creates it, uninstall removes it.
	cx, err := codex.Target(harness.ScopeUser, "", program)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := cx.Install(state, false); err != nil || !c.Created {
		t.Fatalf("codex install: %+v, %v", c, err)
	}
	if fi, err := os.Stat(cx.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("codex hooks.json: %v, %v", fi, err)
	}
	if c, err := cx.Uninstall(state, false); err != nil || !c.Removed {
		t.Fatalf("codex uninstall: %+v, %v", c, err)
	}
	if _, err := os.Stat(cx.Path); !os.IsNotExist(err) {
		t.Errorf("codex hooks.json install created is still there: %v", err)
	}
}
