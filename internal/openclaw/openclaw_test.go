package openclaw

import (
	"fmt"
	"strings"
	"testing"
)

func TestInsertTools(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"no file", "", "## Tools\n\n- jq\n"},
		{"no section", "# Agents\n\nBe kind.\n", "# Agents\n\nBe kind.\n\n## Tools\n\n- jq\n"},
		{"section last", "# Agents\n\n## Tools\n\n- rg\n", "# Agents\n\n## Tools\n\n- rg\n\n- jq\n"},
		{"section in the middle", "## Tools\n\n- rg\n\n## Safety\n\nNo force push.\n", "## Tools\n\n- rg\n\n- jq\n\n## Safety\n\nNo force push.\n"},
		{"subsection stays inside", "## Tools\n\n### Local notes (migrated from TOOLS.md)\n\n- rg\n## Next\n", "## Tools\n\n### Local notes (migrated from TOOLS.md)\n\n- rg\n\n- jq\n\n## Next\n"},
		{"heading in a fence is not one", "## Tools\n```\n## Fake\n```\n- rg\n", "## Tools\n```\n## Fake\n```\n- rg\n\n- jq\n"},
		{"case and trailing hashes", "## tools ##\n- rg", "## tools ##\n- rg\n\n- jq\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(InsertTools([]byte(tc.in), "\n- jq\n\n")); got != tc.want {
				t.Errorf("InsertTools(%q) =\n%q\nwant\n%q", tc.in, got, tc.want)
			}
		})
	}
}

// TestBudget: the sizes and caps OpenClaw 2026.9 gives a session's
// bootstrap files. Invariant: a note Budget calls whole is not cut.
func TestBudget(t *testing.T) {
	files := map[string]string{
		AgentsFile: strings.Repeat("a", 100),
		UserFile:   strings.Repeat("u", 4000) + "\n\n",
		MemoryFile: strings.Repeat("😀", 10), // 20 UTF-16 units
	}
	read := func(name string) ([]byte, bool) {
		s, ok := files[name]
		return []byte(s), ok
	}
	got := Budget(LayoutAgents, Caps{}, "/ws", read)
	byName := map[string]Loaded{}
	for _, f := range got {
		byName[f.Name] = f
	}
	if f := byName[UserFile]; f.Chars != 4000 || f.Cap != 4000 || f.Cut() {
		t.Errorf("USER.md at 4,000 characters: %+v, want whole", f)
	}
	if f := byName[MemoryFile]; f.Chars != 20 || f.Cut() {
		t.Errorf("MEMORY.md: %+v, want 20 characters, whole", f)
	}
	if f := byName[SoulFile]; !f.Missing || f.Cut() {
		t.Errorf("SOUL.md: %+v, want missing", f)
	}
	before := got
	files[UserFile] = strings.Repeat("u", 4001)
	after := Budget(LayoutAgents, Caps{}, "/ws", read)
	if f, over := Overflow(before, after, UserFile); !over || f.Name != UserFile || f.Chars != 4001 {
		t.Errorf("USER.md at 4,001: overflow %+v %v, want USER.md cut", f, over)
	}
	// The total: AGENTS.md takes most of a 5,000 total; USER.md's room is
	// what is left.
	files[UserFile] = strings.Repeat("u", 1000)
	files[AgentsFile] = strings.Repeat("a", 4500)
	after = Budget(LayoutAgents, Caps{Total: 5000}, "/ws", read)
	for _, f := range after {
		if f.Name == UserFile && !f.Cut() {
			t.Errorf("USER.md past the total: %+v, want cut", f)
		}
	}
	if files := Bootstrap(LayoutTools); !strings.Contains(fmt.Sprint(files), ToolsFile) {
		t.Errorf("the older layout loads TOOLS.md: %v", files)
	}
	if files := Bootstrap(LayoutAgents); strings.Contains(fmt.Sprint(files), ToolsFile) {
		t.Errorf("2026.9 does not load TOOLS.md: %v", files)
	}
}

func TestDated(t *testing.T) {
	for name, want := range map[string]bool{
		"2026-04-20-foo.md": true, "2026-04-20.md": true, "2026-04-20-foo.MD": true,
		"2026-04-20foo.md": false, "go-errors.md": false, "x-2026-04-20.md": false, "2026-4-20.md": false,
	} {
		if Dated(name) != want {
			t.Errorf("Dated(%q) = %v, want %v", name, !want, want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig("openclaw.json", []byte(`// written by hand
{
  meta: {lastTouchedVersion: '2026.9.6'},
  agents: {defaults: {workspace: "~/.openclaw/workspace", bootstrapMaxChars: 30000,}},
  memory: {search: {provider: "none", extraPaths: ["rules", " .learnings "]}},
}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != "2026.9.6" || c.Workspace != "~/.openclaw/workspace" || c.Caps.File != 30000 || c.Caps.Total != 0 ||
		fmt.Sprint(c.ExtraPaths) != "[rules .learnings]" {
		t.Errorf("config %+v", c)
	}
	if _, err := ParseConfig("bad.json", []byte("{agents: ")); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("a broken config: %v, want an error naming the file", err)
	}
	if got := ConfigPath(func(k string) string { return map[string]string{"OPENCLAW_STATE_DIR": "~/oc"}[k] }, "/home/me"); got != "/home/me/oc/openclaw.json" {
		t.Errorf("ConfigPath with OPENCLAW_STATE_DIR = %s", got)
	}
	if got := ConfigPath(func(string) string { return "" }, "/home/me"); got != "/home/me/.openclaw/openclaw.json" {
		t.Errorf("ConfigPath = %s", got)
	}
}

func TestDetect(t *testing.T) {
	newer := &Config{Path: "c", Version: "2026.9.6"}
	older := &Config{Path: "c", Version: "2026.8.30"}
	migrated := []byte("## Tools\n\n" + MigratedHeading + "\n\n- rg\n")
	for _, tc := range []struct {
		name        string
		pin, sticky Layout
		agents      []byte
		cfg         *Config
		want        Layout
	}{
		{"pinned older beats everything", LayoutTools, LayoutAgents, migrated, newer, LayoutTools},
		{"sticky", LayoutAuto, LayoutAgents, nil, older, LayoutAgents},
		{"migrated AGENTS.md", LayoutAuto, "", migrated, older, LayoutAgents},
		{"config 2026.9", "", "", nil, newer, LayoutAgents},
		{"config 2026.8", "", "", nil, older, LayoutTools},
		{"config without a version", "", "", nil, &Config{Path: "c"}, LayoutTools},
		{"nothing", "", "", nil, nil, LayoutTools},
	} {
		got := Detect(tc.pin, tc.sticky, tc.agents, tc.cfg)
		if got.Layout != tc.want || got.Why == "" || got.Guess != (tc.name == "nothing" || tc.name == "config without a version") {
			t.Errorf("%s: %+v, want %s", tc.name, got, tc.want)
		}
	}
}

func TestIndex(t *testing.T) {
	var cards []IndexCard
	for i := range 200 {
		cards = append(cards, IndexCard{Name: fmt.Sprintf("card-%03d.md", i), Topic: "a topic\nwith\x1b[31m a line break"})
	}
	block := RenderIndex(cards, 200, IndexBudget)
	if n := Chars([]byte(block)); n > IndexBudget {
		t.Errorf("index of %d characters, budget %d", n, IndexBudget)
	}
	if !strings.Contains(block, "- card-000.md: a topic with[31m a line break\n") || !strings.Contains(block, "more\n"+IndexEnd) {
		t.Errorf("index:\n%s", block)
	}
	memory := []byte("# Memory\nOpenClaw's own note.\n")
	m1 := SetIndex(memory, block)
	if !strings.HasPrefix(string(m1), "# Memory\n\n"+IndexBegin) || !strings.HasSuffix(string(m1), IndexEnd+"\n\nOpenClaw's own note.\n") {
		t.Errorf("first index:\n%s", m1)
	}
	m1 = append(m1, "- promoted by OpenClaw\n"...)
	small := RenderIndex(cards[:1], 1, IndexBudget)
	m2 := SetIndex(m1, small)
	if Index(m2) != small || !strings.HasSuffix(string(m2), "OpenClaw's own note.\n- promoted by OpenClaw\n") || !strings.HasPrefix(string(m2), "# Memory\n") {
		t.Errorf("replaced index:\n%s", m2)
	}
	if got := RenderIndex(nil, 0, IndexBudget); !strings.Contains(got, "No cards") {
		t.Errorf("empty index: %s", got)
	}
}
