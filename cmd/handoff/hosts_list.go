package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/manifest"
)

// hostEntry is one host as `hosts list --json` prints it.
type hostEntry struct {
	Name      string   `json:"name"`
	Transport string   `json:"transport"`
	Address   string   `json:"address,omitempty"` // ssh: [user@]host[:port] as the manifest says
	Inboxes   []string `json:"inboxes"`
	Discover  []string `json:"discover"`
	Mirror    string   `json:"mirror,omitempty"`
	Timeout   string   `json:"timeout"`
}

func newHostsListCmd(g *globals) *cobra.Command {
	var asJSON bool
	var manifestPath string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the manifest's hosts: transport, address, inboxes, mirror",
		Long: `list prints the writer hosts of the manifest in its order, one a line: the
name, the transport, the address of an ssh host as the manifest gives it
(an alias of ~/.ssh/config stays an alias), how many inboxes and discovery
roots it has, and its mirror's path. It reads only the manifest and
connects nowhere; handoff doctor checks the hosts themselves. --json prints
every host with its inboxes and roots in full.`,
		Example: "  handoff hosts list\n  handoff hosts list --json | jq -r '.[].name'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := loadManifest(manifestPath)
			if err != nil {
				return err
			}
			entries := hostEntries(m)
			if asJSON {
				b, err := json.MarshalIndent(entries, "", "  ")
				if err != nil {
					return err
				}
				g.stdout.Write(append(b, '\n'))
				return nil
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTRANSPORT\tADDRESS\tINBOXES\tROOTS\tMIRROR")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", printable(e.Name), e.Transport, dash(printable(e.Address)),
					len(e.Inboxes), len(e.Discover), dash(printable(e.Mirror)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the hosts as a JSON array on stdout")
	cmd.Flags().StringVar(&manifestPath, "manifest", "", "writers manifest (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	return cmd
}

// hostEntries is every manifest host, resolved, in manifest order.
func hostEntries(m *manifest.Manifest) []hostEntry {
	out := []hostEntry{}
	for _, h := range m.HostConfigs() {
		e := hostEntry{Name: h.Name, Transport: h.Transport, Inboxes: h.Inboxes, Discover: []string{}, Timeout: h.Timeout.String()}
		if e.Inboxes == nil {
			e.Inboxes = []string{}
		}
		for _, d := range h.Discover {
			e.Discover = append(e.Discover, d.Root)
		}
		if s := h.SSH; s != nil {
			e.Address = s.Host
			if s.User != "" {
				e.Address = s.User + "@" + e.Address
			}
			if s.Port != 0 {
				e.Address += ":" + strconv.Itoa(s.Port)
			}
		}
		if h.Mirror != nil {
			e.Mirror = h.Mirror.Path
		}
		out = append(out, e)
	}
	return out
}
