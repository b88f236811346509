package codex

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadConfig: config.toml is read, never written, and says when
// Codex runs no hook (the flag false, by either name), when its inline
// [hooks] tables hold handoff's hooks too, and when it cannot be read;
// the notes always say that a hook needs trusting once.
func TestReadConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		toml          string
		off           bool
		flag          string
		inline        int
		err, noteWant string
	}{
		{"", false, "", 0, "", "codex_hooks = true"},
		{"model = \"o3\"\n[features]\nhooks = false\n", true, "hooks = false", 0, "", "runs no hook"},
		{"[features]\ncodex_hooks = true # on\n", false, "codex_hooks = true", 0, "", "trust"},
		{"[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"/usr/bin/handoff hook stop --harness codex\"\n" +
			"[hooks.state.\"x\"]\ntrusted_hash = \"sha256:00\"\n", false, "", 1, "", "each runs twice"},
		{"[features\nhooks = ", false, "", 0, "x", "could not be read"},
	} {
		name := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(name, []byte(tc.toml), 0o600); err != nil {
			t.Fatal(err)
		}
		c := ReadConfig(name)
		if c.Off != tc.off || c.Flag != tc.flag || c.Inline != tc.inline || (c.Err != "") != (tc.err != "") {
			t.Errorf("%q: %+v", tc.toml, c)
		}
		notes := strings.Join(Notes(c, true), "\n")
		for _, want := range []string{tc.noteWant, "/hooks", ".codex/ layer is trusted"} {
			if !strings.Contains(notes, want) {
				t.Errorf("%q: the notes lack %q:\n%s", tc.toml, want, notes)
			}
		}
		if got, _ := os.ReadFile(name); string(got) != tc.toml {
			t.Errorf("config.toml was changed: %q", got)
		}
	}
	if c := ReadConfig(filepath.Join(dir, "none.toml")); c.Exists || c.Err != "" {
		t.Errorf("a missing config.toml: %+v", c)
	}
}

// TestHome: $CODEX_HOME wins over ~/.codex when it is absolute.
func TestHome(t *testing.T) {
	t.Setenv("HOME", "/home/me")
	for env, want := range map[string]string{"": "/home/me/.codex/hooks.json", "/srv/codex": "/srv/codex/hooks.json", "rel": "/home/me/.codex/hooks.json"} {
		t.Setenv("CODEX_HOME", env)
		if got, err := UserFile(); err != nil || got != want {
			t.Errorf("CODEX_HOME=%q: %s, %v; want %s", env, got, err, want)
		}
	}
}
