package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/workspace"
)

func init() { commands = append(commands, newInitCmd) }

type initCmd struct {
	g            *globals
	json         bool
	manifestPath string
	workspace    string
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
		Example: "  handoff init\n  handoff init --workspace ~/.openclaw/workspace --json",
		Args:    cobra.NoArgs,
		RunE:    c.run,
	}
	f := cmd.Flags()
	f.BoolVar(&c.json, "json", false, "print the identity as JSON on stdout")
	f.StringVar(&c.manifestPath, "manifest", "", "writers manifest, for its workspace (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	f.StringVar(&c.workspace, "workspace", "", "workspace directory (overrides the manifest; no manifest needed)")
	return cmd
}

func (c *initCmd) run(cmd *cobra.Command, _ []string) error {
	ws := c.workspace
	if ws == "" || c.manifestPath != "" {
		m, err := loadManifest(c.manifestPath)
		if err != nil {
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
	fmt.Fprintln(out, "next: `handoff sync` pulls every host into it (`handoff sync --dry-run` first shows what it would do)")
	return nil
}
