package doctor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/doctor"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/manifest"
)

// TestDoctorReviewAge: what waits for a person is counted from the
// ledger, with the oldest; past review_max_age (7 days unless the manifest
// says otherwise) it warns, with a hint pointing to `handoff review`.
func TestDoctorReviewAge(t *testing.T) {
	e := newDrEnv(t, "")
	e.Put(e.Inbox, "ok.md", testenv.Doc("TOOLS.md", "- ok"))
	e.sync()
	drWant(t, drOne(t, e.doctor(), "workspace", "review-age"), doctor.CheckOK, "nothing waits for review")
	e.Put(e.Inbox, "r1.md", testenv.Doc("../out.md", "- a"))
	e.Put(e.Inbox, "r2.md", "not a handoff\n")
	e.sync()
	c := drOne(t, e.doctor(), "workspace", "review-age")
	drWant(t, c, doctor.CheckOK, "2 item(s) wait for review, the oldest for ")
	later := func(d time.Duration) func(*doctor.Options) {
		return func(o *doctor.Options) { o.Now = func() time.Time { return time.Now().Add(d) } }
	}
	c = drOne(t, e.doctor(later(8*24*time.Hour)), "workspace", "review-age")
	drWant(t, c, doctor.CheckWarn, ": longer than review_max_age (7d0h)")
	drWant(t, c, doctor.CheckWarn, "2 item(s) wait for review, the oldest for 8d0h")
	if c.Hint == "" {
		t.Error("no hint")
	}
	e.M.Defaults.ReviewMaxAge = &manifest.Duration{Duration: 10 * 24 * time.Hour}
	drWant(t, drOne(t, e.doctor(later(8*24*time.Hour)), "workspace", "review-age"), doctor.CheckOK, "2 item(s)")
}

// TestDoctorMalformedWriter: a host whose last handoffs were mostly
// malformed warns, naming the host and the latest parse error; one
// malformed handoff among good ones does not.
func TestDoctorMalformedWriter(t *testing.T) {
	e := newDrEnv(t, "")
	e.Put(e.Inbox, "good.md", testenv.Doc("TOOLS.md", "- a"))
	e.Put(e.Inbox, "bad0.md", "not a handoff 0\n")
	r := e.sync()
	if r.Counts.Malformed != 1 {
		t.Fatalf("fixture: %+v", r.Counts)
	}
	if cs := drFind(e.doctor(), "workspace", "malformed-writer"); len(cs) != 0 {
		t.Errorf("one malformed handoff warned: %+v", cs)
	}
	for i := 1; i <= 3; i++ {
		e.Put(e.Inbox, fmt.Sprintf("bad%d.md", i), fmt.Sprintf("# Memory Handoff\nno sections %d\n", i))
		e.sync()
	}
	c := drOne(t, e.doctor(), "workspace", "malformed-writer")
	drWant(t, c, doctor.CheckWarn, "host canonical keeps sending malformed handoffs: 4 of its last 5 were malformed (the latest, ")
	drWant(t, c, doctor.CheckWarn, "no known section")
	if c.Hint == "" {
		t.Error("no hint")
	}
}
