package main

import (
	"fmt"
	"os"
	"time"
)

// clockEnv names a fixed "now" for prune and doctor, in RFC 3339, so that
// test scenarios can age what a run recorded without waiting. It is for
// tests: nothing else reads it, and the ledger and receipts always record
// the real time.
const clockEnv = "HANDOFF_NOW"

// clock is time.Now, or the fixed time HANDOFF_NOW names.
func clock() (func() time.Time, error) {
	v := os.Getenv(clockEnv)
	if v == "" {
		return time.Now, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("%s=%q: not an RFC 3339 time", clockEnv, v),
			hint: fmt.Sprintf("unset %s (it is for tests), or give a time such as 2026-12-01T12:00:00Z", clockEnv)}
	}
	return func() time.Time { return t }, nil
}
