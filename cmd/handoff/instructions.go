package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

func init() { commands = append(commands, newInstructionsCmd) }

func newInstructionsCmd(g *globals) *cobra.Command {
	var manifestPath, host, harness string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "instructions --host NAME [--harness .claude|.codex|...]",
		Short: "Print the closeout instruction for an agent's AGENTS.md on a host (harnesses without hooks)",
		Long: `On Claude Code and Codex, set a writer host up with the hooks instead:
` + "`handoff hooks install --harness claude`" + ` (or codex) brings the last agents'
notes into every session and asks for a handoff when a session that changed
files stops without one, without relying on the agent to remember an
instruction (docs/hooks.md). This block is the fallback for harnesses without
hooks (Grok, Hermes), and a reminder for the others.

instructions prints the block to put in the agent instruction file (CLAUDE.md,
AGENTS.md) on a writer host: write a memory handoff at the end of substantial
work, into which inbox, and, when the host has a mirror, read canonical memory
from it and take update-card hashes from its SHA256SUMS; when the mirror
includes repos, run handoff context when a session starts; and fill Open
questions and Next steps when it stops. The inboxes are those
the last sync found on the host (run ` + "`handoff sync`" + ` first for a new host).

With --harness only that harness's inboxes are named (.claude for Claude Code,
.codex for Codex, and so on).

On a writer host (a mirror at ` + defaultMirror + `, no manifest) it needs no
--host: it prints the block for this host from its mirror's MIRROR.json.`,
		Example: `  handoff instructions --host laptop --harness .grok >> ~/code/app/AGENTS.md
  handoff instructions            # on a writer host, from its mirror`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(g.stderr, "note: on Claude Code and Codex, install the hooks instead: handoff hooks install --harness claude|codex (docs/hooks.md); this block is the fallback for harnesses without hooks (Grok, Hermes)")
			if manifestPath == "" {
				if _, err := os.Stat(manifest.DefaultPath()); errors.Is(err, fs.ErrNotExist) {
					if w := writerHost(); w != nil {
						return writerInstructions(g, w, harness, asJSON)
					}
				}
			}
			m, err := loadManifest(manifestPath)
			if err != nil {
				return err
			}
			if host == "" {
				return &exitError{code: exitUsage, err: fmt.Errorf("instructions: which host? the manifest lists %s", strings.Join(m.HostNames(), ", ")),
					hint: "name one with --host NAME"}
			}
			h, ok := m.Host(host)
			if !ok {
				return &exitError{code: exitUsage, err: fmt.Errorf("instructions: no host %q in %s", host, m.Path),
					hint: "the manifest lists " + strings.Join(m.HostNames(), ", ")}
			}
			if harness != "" && !slices.Contains(h.Harnesses, harness) {
				return &exitError{code: exitUsage, err: fmt.Errorf("instructions: %q is not a harness of host %s", harness, host),
					hint: "its harnesses are " + strings.Join(h.Harnesses, ", ")}
			}
			in := mirror.GuideInput{Host: h.Name, Canonical: mirror.CanonicalName()}
			if h.Mirror != nil {
				in.Dir = h.Mirror.Path
				in.Cards, in.Documents = h.Mirror.Includes(manifest.MirrorCards), h.Mirror.Includes(manifest.MirrorDocuments)
				in.Repos = h.Mirror.Includes(manifest.MirrorRepos)
			}
			if rc, err := receipts.Read(filepath.Join(m.Workspace, layout.ReceiptsDir, "latest.json")); err == nil {
				for _, rh := range rc.Hosts {
					if rh.Name != h.Name {
						continue
					}
					for _, ib := range rh.Inboxes {
						in.Inboxes = append(in.Inboxes, ib.Path)
					}
					if rh.Mirror != nil && rh.Mirror.Dir != "" {
						in.Dir = rh.Mirror.Dir
					}
				}
			}
			in.Inboxes = append(in.Inboxes, h.Inboxes...)
			slices.Sort(in.Inboxes)
			in.Inboxes = slices.Compact(in.Inboxes)
			text := mirror.Instructions(in, harness)
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"host": h.Name, "harness": harness, "mirror": in.Dir, "inboxes": in.Inboxes, "text": text})
			}
			fmt.Fprint(g.stdout, text)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&manifestPath, "manifest", "", "writers manifest (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	f.StringVar(&host, "host", "", "the writer host the instruction is for")
	f.StringVar(&harness, "harness", "", "name only this harness's inboxes (.claude, .codex, ...)")
	f.BoolVar(&asJSON, "json", false, "print the text with its host, mirror and inboxes as JSON")
	return cmd
}

// writerInstructions prints the block on a writer host, from what its
// mirror says: the host's name, the canonical host's, what it holds.
func writerInstructions(g *globals, w *writer, harness string, asJSON bool) error {
	in := mirror.GuideInput{Host: w.info.Host, Canonical: w.info.Canonical, Dir: w.mirror}
	if in.Canonical == "" {
		in.Canonical = "the canonical host"
	}
	for _, d := range []struct {
		dir string
		set *bool
	}{{layout.CardsDir, &in.Cards}, {mirror.ReposDir, &in.Repos}} {
		if fi, err := os.Stat(filepath.Join(w.mirror, filepath.FromSlash(d.dir))); err == nil && fi.IsDir() {
			*d.set = true
		}
	}
	_, err := os.Stat(filepath.Join(w.mirror, "TOOLS.md"))
	in.Documents = err == nil
	text := mirror.Instructions(in, harness)
	if asJSON {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"host": in.Host, "harness": harness, "mirror": in.Dir, "inboxes": []string{}, "text": text})
	}
	fmt.Fprint(g.stdout, text)
	return nil
}
