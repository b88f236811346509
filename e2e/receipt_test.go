package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/handoff-sync/handoff/receipts"
)

// TestReceiptSchema: the receipt decodes into the strict struct (unknown
// fields rejected) and carries every SPEC field with the specified values.
func TestReceiptSchema(t *testing.T) {
	w := newWorld(t)
	w.mixed()
	if code, out := w.sync(); code != 0 {
		t.Fatalf("sync exited %d:\n%s", code, out)
	}
	data, err := os.ReadFile(filepath.Join(w.ws, ".handoff/receipts/latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := receipts.Decode(data)
	if err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	perRun, err := os.ReadFile(filepath.Join(w.ws, ".handoff/receipts", r.RunID+".json"))
	if err != nil || string(perRun) != string(data) {
		t.Fatalf("per-run receipt differs from latest.json (%v)", err)
	}
	if !regexp.MustCompile(`^\d{8}T\d{6}Z-[0-9a-f]{6}$`).MatchString(r.RunID) {
		t.Errorf("run_id %q", r.RunID)
	}
	mf, _ := os.ReadFile(w.manifest)
	switch {
	case r.SchemaVersion != 1, r.Mode != "apply", r.Outcome != "ok", r.Status != "ingested":
		t.Errorf("header %d %s %s %s", r.SchemaVersion, r.Mode, r.Outcome, r.Status)
	case r.FinishedAt.Before(r.StartedAt) || r.StartedAt.IsZero():
		t.Errorf("times %v %v", r.StartedAt, r.FinishedAt)
	case r.Manifest.Path != w.manifest || r.Manifest.SHA256 != sum(string(mf)):
		t.Errorf("manifest %+v", r.Manifest)
	case r.Workspace != w.ws:
		t.Errorf("workspace %q", r.Workspace)
	case !r.Notify.OK:
		t.Errorf("notify %+v", r.Notify)
	}
	want := receipts.Counts{Pulled: 10, Promoted: 3, Routed: 4, Review: 1, Malformed: 1, Duplicate: 1}
	if r.Counts != want {
		t.Errorf("counts %+v, want %+v", r.Counts, want)
	}
	if len(r.Hosts) != 1 || r.Hosts[0].Name != "canonical" || r.Hosts[0].Transport != "local" || r.Hosts[0].Outcome != "ok" || len(r.Hosts[0].Inboxes) != 2 {
		t.Fatalf("hosts %+v", r.Hosts)
	}
	for _, in := range r.Hosts[0].Inboxes {
		if in.State != "ok" || in.Pending == 0 {
			t.Errorf("inbox %+v", in)
		}
	}
	shaRE := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, h := range r.Handoffs {
		if h.Host != "canonical" || h.Inbox == "" || !shaRE.MatchString(h.SHA256) || h.Size == 0 || h.ArchivedAs == "" {
			t.Errorf("handoff %+v", h)
		}
		if (h.Result == "promoted" || h.Result == "routed") && (!shaRE.MatchString(h.AfterSHA256) || h.Target == "" || h.Action == "") {
			t.Errorf("applied handoff without target or hashes: %+v", h)
		}
		if mixedResults[h.Name] != h.Result {
			t.Errorf("%s: result %s, want %s", h.Name, h.Result, mixedResults[h.Name])
		}
	}
	// Every SPEC key is present in the JSON itself, not just decodable.
	var raw map[string]any
	json.Unmarshal(data, &raw)
	for _, k := range []string{"schema_version", "run_id", "mode", "outcome", "status", "started_at", "finished_at", "manifest", "workspace", "counts", "hosts", "handoffs", "notify"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("receipt lacks %q", k)
		}
	}
	h0 := raw["handoffs"].([]any)[0].(map[string]any)
	for _, k := range []string{"host", "inbox", "name", "sha256", "size", "result", "reason", "action", "target", "before_sha256", "after_sha256", "archived_as"} {
		if _, ok := h0[k]; !ok {
			t.Errorf("handoff entry lacks %q", k)
		}
	}
	host0 := raw["hosts"].([]any)[0].(map[string]any)
	in0 := host0["inboxes"].([]any)[0].(map[string]any)
	for _, k := range []string{"path", "state", "pending", "tracked"} {
		if _, ok := in0[k]; !ok {
			t.Errorf("inbox entry lacks %q", k)
		}
	}
	if _, err := receipts.Decode([]byte(`{"schema_version":1,"surprise":true}`)); err == nil {
		t.Error("Decode accepted an unknown field")
	}
}

// TestSyncJSONIsTheReceiptFile: `sync --json` prints the run's receipt
// file byte for byte, and a dry run, which writes no receipt, prints one
// that decodes with the same fields a real run has.
func TestSyncJSONIsTheReceiptFile(t *testing.T) {
	w := newWorld(t)
	w.mixed()
	stdout := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(binary(), args...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("handoff %v: %v\n%s", args, err, errb.String())
		}
		return out
	}
	dry := stdout("sync", "--dry-run", "--json", "--manifest", w.manifest)
	if r, err := receipts.Decode(dry); err != nil || r.Mode != receipts.ModeDryRun || r.Counts.Pulled == 0 {
		t.Fatalf("dry run's receipt: %v, %+v\n%s", err, r, dry)
	}
	out := stdout("sync", "--json", "--manifest", w.manifest)
	r, err := receipts.Decode(out)
	if err != nil {
		t.Fatalf("receipt on stdout: %v\n%s", err, out)
	}
	file, err := os.ReadFile(filepath.Join(w.ws, ".handoff/receipts", r.RunID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, file) {
		t.Fatalf("stdout (%d bytes) is not the receipt file (%d bytes)", len(out), len(file))
	}
}
