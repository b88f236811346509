package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/ingest"
)

type lintResult struct {
	File     string        `json:"file"`
	OK       bool          `json:"ok"`
	Problems []lintProblem `json:"problems"`
}

type lintProblem struct {
	Reason  string `json:"reason"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func newLintCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "lint FILE...",
		Short: "Check handoff files; print each problem with its reason code",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var results []lintResult
			bad := false
			for _, name := range args {
				data, err := os.ReadFile(name)
				if err != nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("lint: %w", err)}
				}
				probs := []lintProblem{}
				for _, p := range ingest.Lint(data) {
					probs = append(probs, lintProblem{Reason: p.Reason, Field: p.Field, Message: p.Message})
				}
				results = append(results, lintResult{File: name, OK: len(probs) == 0, Problems: probs})
				bad = bad || len(probs) > 0
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(results); err != nil {
					return err
				}
			} else {
				for _, r := range results {
					if r.OK {
						fmt.Fprintf(g.stdout, "%s: ok\n", r.File)
					}
					for _, p := range r.Problems {
						fmt.Fprintf(g.stdout, "%s: %s: %s\n", r.File, p.Reason, p.Message)
					}
				}
			}
			if bad {
				return silent(exitFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print results as JSON")
	return cmd
}
