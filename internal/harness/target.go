package harness

import (
	"errors"
	"io/fs"
	"os"
)

// Scopes of a hooks file.
const (
	ScopeUser    = "user"    // the user's own file: every repository
	ScopeProject = "project" // one repository's file
)

// Target is one harness's hooks file in one scope, and the hooks handoff
// wants in it.
type Target struct {
	Harness string
	Scope   string
	Path    string
	Want    []Hook
	// Perm is a new file's mode.
	Perm fs.FileMode
	// Notes says what, in the file or beside it, keeps the harness from
	// running what the file holds; nil for nothing.
	Notes func(data []byte) []string
}

// HookStatus is one of handoff's hooks in a file.
type HookStatus struct {
	Kind  string `json:"kind"`
	Event string `json:"event"`
	State string `json:"state"` // StateCurrent, StateOutdated, StateAbsent
	// Found are handoff's handlers of this kind in the file (none when
	// absent; more than one is outdated).
	Found []FoundProgram `json:"found"`
	Want  string         `json:"want"` // the command install writes
}

// FoundProgram is a handler found, and whether its program is there.
type FoundProgram struct {
	Found
	ProgramExists bool `json:"program_exists"`
}

// Status is what a file holds of handoff's hooks.
type Status struct {
	Harness string `json:"harness"`
	Scope   string `json:"scope"`
	Path    string `json:"path"`
	Exists  bool   `json:"exists"`
	// State is StateCurrent when every hook is, StateAbsent when none is
	// there, else StateOutdated ("unreadable" when the file cannot be
	// read or is not a hooks file).
	State string       `json:"state"`
	Hooks []HookStatus `json:"hooks"`
	Notes []string     `json:"notes,omitempty"`
	Err   string       `json:"error,omitempty"`
}

// StateUnreadable is a file that cannot be read or parsed.
const StateUnreadable = "unreadable"

// Status reads the target's file and says what of handoff's it holds.
func (t Target) Status() Status {
	st := Status{Harness: t.Harness, Scope: t.Scope, Path: t.Path, Hooks: []HookStatus{}}
	data, _, existed, err := ReadFile(t.Path)
	st.Exists = existed
	if err != nil {
		st.State, st.Err = StateUnreadable, err.Error()
		return st
	}
	found, states, err := Inspect(data, t.Want)
	if err != nil {
		st.State, st.Err = StateUnreadable, err.Error()
		return st
	}
	current, absent := true, true
	for _, w := range t.Want {
		hs := HookStatus{Kind: w.Kind, Event: w.Event, State: states[w.Kind], Want: w.Command, Found: []FoundProgram{}}
		for _, f := range found {
			if f.Kind != w.Kind {
				continue
			}
			fp := FoundProgram{Found: f}
			if fi, err := os.Stat(f.Program); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				fp.ProgramExists = true
			} else if hs.State == StateCurrent {
				hs.State = StateOutdated
			}
			hs.Found = append(hs.Found, fp)
		}
		current = current && hs.State == StateCurrent
		absent = absent && hs.State == StateAbsent
		st.Hooks = append(st.Hooks, hs)
	}
	switch {
	case current:
		st.State = StateCurrent
	case absent:
		st.State = StateAbsent
	default:
		st.State = StateOutdated
	}
	if t.Notes != nil && existed {
		st.Notes = t.Notes(data)
	}
	return st
}

// Install merges the target's hooks into its file (see Install).
func (t Target) Install(backups string, dryRun bool) (*Change, error) {
	return Edit(t.Path, backups, t.Perm, dryRun, func(old []byte, _ bool) ([]byte, bool, bool, error) {
		out, changed, err := Install(old, t.Want)
		return out, changed, false, err
	})
}

// Uninstall removes handoff's hooks from the target's file (see
// Uninstall); a missing file is left missing.
func (t Target) Uninstall(backups string, dryRun bool) (*Change, error) {
	return Edit(t.Path, backups, t.Perm, dryRun, func(old []byte, existed bool) ([]byte, bool, bool, error) {
		if !existed {
			return nil, false, false, nil
		}
		return Uninstall(old, programs(t.Want)...)
	})
}

// IsSyntax reports whether err is a file handoff refuses to change.
func IsSyntax(err error) bool {
	var se *SyntaxError
	return errors.As(err, &se)
}
