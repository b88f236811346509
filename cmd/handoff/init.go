package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/transport"
)

func init() { commands = append(commands, newInitCmd) }

type initCmd struct {
	g            *globals
	json         bool
	manifestPath string
	workspace    string
	newMemory    bool
}

// initReport is what init --json prints.
type initReport struct {
	Workspace string    `json:"workspace"`
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	Origin    string    `json:"origin"`
	// Created is true when this init gave the workspace its identity,
	// false when it had one and nothing was changed.
	Created bool `json:"created"`
}

func newInitCmd(g *globals) *cobra.Command {
	c := &initCmd{g: g}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Make (or adopt) the workspace, with an identity; every other command needs one",
		Long: `init makes the workspace the manifest names (or --workspace names) and gives
it an identity: a random id and the time it was made, written durably to
.handoff/workspace.json and recorded in the ledger. Receipts carry the id as
workspace_id, and handoff where and handoff doctor show it.

A directory that does not exist is made (0700). One that exists, such as an
OpenClaw workspace that already holds memory/cards, is adopted as it is:
nothing in it is read, moved or rewritten; it gains only .handoff/. A
workspace made by an earlier handoff (a ledger, no identity) gets its
identity as its first sync would give it.

sync, review, import, prune and timer install refuse a directory without an
identity (exit 2, creating nothing), so that a typo in workspace: never
starts a second, empty memory. init is idempotent: on a workspace that has
an identity it changes nothing, says so, and exits 0. --json prints the
identity.`,
		Example: "  handoff init\n  handoff init --workspace ~/.openclaw/workspace --json\n  handoff init --workspace ~/work-memory --new-memory",
		Args:    cobra.NoArgs,
		RunE:    c.run,
	}
	f := cmd.Flags()
	f.BoolVar(&c.json, "json", false, "print the identity as JSON on stdout")
	f.StringVar(&c.manifestPath, "manifest", "", "writers manifest, for its workspace (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	f.StringVar(&c.workspace, "workspace", "", "workspace directory (overrides the manifest; no manifest needed)")
	f.BoolVar(&c.newMemory, "new-memory", false, "make the workspace even though another memory exists (a second, separate memory)")
	return cmd
}

func (c *initCmd) run(cmd *cobra.Command, _ []string) error {
	ws := c.workspace
	var m *manifest.Manifest
	if ws == "" || c.manifestPath != "" {
		var err error
		if m, err = loadManifest(c.manifestPath); err != nil {
			return err
		}
		if ws, err = setup.Workspace(m, ws); err != nil {
			return err
		}
	}
	ws, err := filepath.Abs(ws)
	if err != nil {
		return err
	}
	others, err := c.otherMemories(cmd, ws, m)
	if err != nil {
		return err
	}
	id, made, err := handoff.Init(cmd.Context(), ws)
	if err != nil {
		return err
	}
	if c.json {
		b, err := json.MarshalIndent(initReport{Workspace: ws, ID: id.ID, CreatedAt: id.CreatedAt, Origin: id.Origin, Created: made}, "", "  ")
		if err != nil {
			return err
		}
		c.g.stdout.Write(append(b, '\n'))
		return nil
	}
	out := c.g.stdout
	switch {
	case !made:
		fmt.Fprintf(out, "%s is a workspace already (id %s, made %s): nothing changed\n", ws, id.ID, id.CreatedAt.Format(time.RFC3339))
		return nil
	case id.Origin == workspace.OriginAdopted:
		fmt.Fprintf(out, "adopted %s as a workspace (id %s): nothing in it was changed; handoff keeps its state in %s\n", ws, id.ID, layout.StateDir)
	case id.Origin == workspace.OriginUpgraded:
		fmt.Fprintf(out, "gave %s, a workspace an earlier handoff made, its identity (id %s)\n", ws, id.ID)
	default:
		fmt.Fprintf(out, "made workspace %s (id %s)\n", ws, id.ID)
	}
	if len(others) > 0 {
		fmt.Fprintf(out, "it is a second, separate memory (--new-memory): handoffs synced into it never reach the other one (%s)\n", strings.Join(others, "; "))
	}
	fmt.Fprintln(out, "next: `handoff sync` pulls every host into it (`handoff sync --dry-run` first shows what it would do)")
	return nil
}

// otherMemories refuses (exit 2, nothing made) to give dir a new
// identity while another memory is there for it (setup.OtherMemories),
// unless --new-memory: a typo in workspace: must not start a second
// memory by accident. It returns what it found when --new-memory let
// init go on. A workspace that has an identity, or an earlier handoff's
// ledger, is no new memory.
func (c *initCmd) otherMemories(cmd *cobra.Command, ws string, m *manifest.Manifest) ([]string, error) {
	if _, err := workspace.Read(ws); !errors.Is(err, workspace.ErrNoIdentity) || workspace.Has(ws) {
		return nil, nil
	}
	if m == nil && c.manifestPath == "" {
		// --workspace alone: the default manifest's hosts, if it names
		// this workspace, are the ones that would feed it.
		if dm, err := manifest.Load(manifest.DefaultPath()); err == nil {
			if dws, err := setup.Workspace(dm, ""); err == nil && dws == ws {
				m = dm
			}
		}
	}
	others := append(setup.OtherMemories(ws), mirrorOwners(cmd.Context(), m)...)
	if len(others) == 0 || c.newMemory {
		return others, nil
	}
	return nil, &exitError{code: exitUsage,
		err: fmt.Errorf("init: a workspace at %s would be a second, separate memory, and nothing was made:\n  %s",
			workspace.Tilde(ws), strings.Join(others, "\n  ")),
		hint: "if the manifest's workspace: (or --workspace) has a typo, fix it to name the workspace you have; " +
			"only to keep a second memory on purpose, run again with --new-memory: handoffs synced into it never reach the other, " +
			"and each host's handoffs go to whichever workspace syncs them first"}
}

// mirrorOwners says, one line each, which workspace each local host of m
// (nil: none) publishes its mirror for, as the mirror's MIRROR.json names
// it: a host that already feeds that memory. It reads this machine only;
// a sync refuses an ssh host's mirror another workspace owns
// (mirror.ForeignError).
func mirrorOwners(ctx context.Context, m *manifest.Manifest) []string {
	if m == nil {
		return nil
	}
	var out []string
	local := transport.NewLocal()
	for _, h := range m.HostConfigs() {
		if h.Transport != manifest.TransportLocal || h.Mirror == nil {
			continue
		}
		info, err := mirror.ReadHostInfo(ctx, local, h.Mirror.Path)
		if err != nil || info == nil || info.WorkspaceID == "" {
			continue
		}
		out = append(out, fmt.Sprintf("host %s's mirror at %s belongs to workspace %.8s (its MIRROR.json, generation %d): that workspace syncs %s",
			h.Name, h.Mirror.Path, info.WorkspaceID, info.Generation, h.Name))
	}
	return out
}
