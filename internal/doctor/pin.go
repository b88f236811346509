package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/handoff-sync/handoff/timer"
)

// pinHint is what to do about a pinned binary that no longer matches.
const pinHint = "if you upgraded handoff, run `handoff timer install` again to pin the new binary; " +
	"if you did not, find out what replaced it first: until then every timer run fails before handoff starts"

// doctorPin checks the binary the installed timer service is pinned to:
// it must exist and hash to the pin. Nothing is checked when no service
// is installed.
func doctorPin() []Check {
	dir, err := timer.UnitDir()
	if err != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, timer.ServiceName)); err != nil {
		return nil
	}
	c := Check{Scope: "timer", Name: "pin", Status: CheckFail}
	pinPath := filepath.Join(dir, timer.PinName)
	text, err := os.ReadFile(pinPath)
	if errors.Is(err, fs.ErrNotExist) {
		c.Status = CheckWarn
		c.Message = fmt.Sprintf("%s runs handoff without a pinned SHA-256 (no %s)", timer.ServiceName, pinPath)
		c.Hint = "run `handoff timer install` again: it pins the binary, and the service then refuses any other"
		return []Check{c}
	}
	if err != nil {
		c.Message, c.Hint = fmt.Sprintf("cannot read the pin: %v", err), "make it readable, or run `handoff timer install` again"
		return []Check{c}
	}
	want, bin, err := timer.ParsePin(string(text))
	if err != nil {
		c.Message = fmt.Sprintf("%s: %v", pinPath, err)
		c.Hint = "run `handoff timer install` again to write it anew"
		return []Check{c}
	}
	got, err := timer.HashFile(bin)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Message = fmt.Sprintf("pinned binary %s is missing: the service cannot start", bin)
		c.Hint = pinHint
	case err != nil:
		c.Message = fmt.Sprintf("cannot hash the pinned binary: %v", err)
		c.Hint = pinHint
	case got != want:
		c.Message = fmt.Sprintf("pinned binary %s has SHA-256 %s…, not the pinned %s…: the service refuses to start it", bin, got[:12], want[:12])
		c.Hint = pinHint
	default:
		c.Status = CheckOK
		c.Message = fmt.Sprintf("%s runs %s, pinned to SHA-256 %s…", timer.ServiceName, bin, want[:12])
	}
	return []Check{c}
}
