package setup

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/manifest"
)

// DefaultWorkspace is where OpenClaw keeps its workspace, and the
// manifest's default.
const DefaultWorkspace = "~/.openclaw/workspace"

// OtherMemories says, one line each, what on this machine shows that a
// memory other than the one a new workspace at dir (absolute, with no
// identity yet) would start already exists: a workspace near dir (a typo
// of its name, one below it: workspace.Near) and the default workspace.
// It only lists and stats. (The CLI adds what local mirrors say.)
func OtherMemories(dir string) []string {
	var out []string
	seen := map[string]bool{dir: true}
	name := func(ws string) string {
		if id, err := workspace.Read(ws); err == nil {
			return fmt.Sprintf("%s is a workspace (id %s)", workspace.Tilde(ws), id.Short())
		}
		return fmt.Sprintf("%s is a workspace", workspace.Tilde(ws))
	}
	for _, n := range workspace.Near(dir) {
		seen[n] = true
		out = append(out, name(n)+", near "+workspace.Tilde(dir))
	}
	if def, err := Workspace(&manifest.Manifest{Workspace: expandLocal(DefaultWorkspace)}, ""); err == nil && !seen[def] && workspace.Has(def) {
		seen[def] = true
		out = append(out, name(def)+", the default one")
	}
	return out
}

// expandLocal is p with a leading "~" as this user's home.
func expandLocal(p string) string {
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.FromSlash(manifest.ExpandHome(p, home))
}
