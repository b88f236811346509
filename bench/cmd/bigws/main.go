// Command bigws makes the pieces of the benchmark's big workspace
// (bench/bigws.sh): the handoffs that real `handoff sync` runs ingest,
// and a year of receipts copied from a real idle run's.
//
//	bigws handoffs -root DIR -from 0 -count 2000 [-hosts 8 -repos 100 -docs 300]
//	bigws receipts -ws DIR -n 17419 [-every 30m]
//
// handoffs writes handoffs number from..from+count-1 into the inboxes of
// DIR/hK/code/gG/repoN/{.claude,.codex}/memory-handoffs (the shape of
// bench/setup.sh's hosts), an hour old, spread over every host,
// repository and harness in turn. Even numbers create a card of their
// own (big-<i>.md); odd ones append to one of -docs documents (the six
// fixed ones, then rules/topic-NNN.md), in turn. Every tenth one has
// next steps and continues the handoff its inbox got before it.
//
// receipts makes the year's other runs from the workspace's latest.json
// (the idle run the script made last): n runs with fresh run ids, start
// and finish times every -every before the workspace's first run (so n
// runs end where the real ones begin), each written by the receipts
// package's own writer as sync writes it (a per-run receipt whose quiet
// inboxes are counted, not listed), and each recorded in the ledger:
// through the ledger package's StartRun and FinishRun when this build's
// ledger knows the workspace's schema, else with the same statements; the
// times those write (now) are then set to the run's. No retention runs
// here: the script's last real sync applies it, as every sync does. A
// latest.json this build cannot decode (another version's) is copied byte
// for byte instead, as the generator did before receipts were compacted.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/receipts"
	_ "modernc.org/sqlite"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bigws handoffs|receipts [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "handoffs":
		err = handoffs(os.Args[2:])
	case "receipts":
		err = receiptsCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bigws:", err)
		os.Exit(1)
	}
}

// inbox is where handoff i goes: host, repository and harness in turn.
func inbox(root string, i, hosts, repos int) (dir string, host, repo int) {
	host = i%hosts + 1
	repo = (i/hosts)%repos + 1
	harness := ".claude"
	if (i/(hosts*repos))%2 == 1 {
		harness = ".codex"
	}
	g := (repo-1)/10 + 1
	return filepath.Join(root, fmt.Sprintf("h%d/code/g%d/repo%d", host, g, repo), harness, "memory-handoffs"), host, repo
}

func name(i int) string { return fmt.Sprintf("2025-06-01-1200-big-%d.md", i) }

// document is the target of the odd handoffs' appends, in turn over docs.
func document(i, docs int) string {
	fixed := []string{"TOOLS.md", "USER.md", "rules/go.md", ".learnings/LEARNINGS.md", ".learnings/ERRORS.md", ".learnings/FEATURE_REQUESTS.md"}
	j := (i / 2) % docs
	if j < len(fixed) {
		return fixed[j]
	}
	return fmt.Sprintf("rules/topic-%03d.md", j)
}

func body(i, hosts, repos, docs int) []byte {
	_, host, repo := inbox("", i, hosts, repos)
	tag := fmt.Sprintf("big-h%d-r%d-%d", host, repo, i)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Memory Handoff\n\n## Type\nworkflow\n\n## Title\nBig workspace handoff %s\n\n", tag)
	fmt.Fprintf(&b, "## Summary\nA handoff of the benchmark's big workspace for host h%d, repository %d, number %d.\n\n", host, repo, i)
	fmt.Fprintf(&b, "## Durable facts\n- The build of %s uses make.\n- Tests run with go test.\n\n## Evidence\nObserved while working on %s.\n\n", tag, tag)
	if i%10 == 9 {
		fmt.Fprintf(&b, "## Next steps\n- Look again at %s's flaky test.\n\n", tag)
		if prev := i - hosts*repos*2; prev >= 0 {
			fmt.Fprintf(&b, "## Continues\n%s\n\n", name(prev))
		}
	}
	if i%2 == 0 {
		fmt.Fprintf(&b, "## Recommended memory action\ncreate-card\n\n## Target card\nbig-%d.md\n\n", i)
		fmt.Fprintf(&b, "## Suggested card content\n---\ntopic: big %s\ncategory: workflow\ntags: [bench, big, h%d]\n---\nThe repository %s builds with make; its tests run with go test.\n", tag, host, tag)
	} else {
		fmt.Fprintf(&b, "## Recommended memory action\nno-card\n\n## Target document\n%s\n\n", document(i, docs))
		fmt.Fprintf(&b, "## Suggested document content\n- %s: prefer make over ad-hoc go build commands.\n", tag)
	}
	return b.Bytes()
}

func handoffs(args []string) error {
	fl := flag.NewFlagSet("handoffs", flag.ExitOnError)
	root := fl.String("root", "", "the hosts' tree (hK/code/...)")
	from := fl.Int("from", 0, "the first handoff's number")
	count := fl.Int("count", 2000, "how many")
	hosts := fl.Int("hosts", 8, "hosts")
	repos := fl.Int("repos", 100, "repositories per host")
	docs := fl.Int("docs", 300, "documents the appends go to")
	fl.Parse(args)
	if *root == "" {
		return errors.New("handoffs: -root is needed")
	}
	old := time.Now().Add(-time.Hour)
	made := map[string]bool{}
	for i := *from; i < *from+*count; i++ {
		dir, _, _ := inbox(*root, i, *hosts, *repos)
		if !made[dir] {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			made[dir] = true
		}
		p := filepath.Join(dir, name(i))
		if err := os.WriteFile(p, body(i, *hosts, *repos, *docs), 0o644); err != nil {
			return err
		}
		if err := os.Chtimes(p, old, old); err != nil {
			return err
		}
	}
	return nil
}

// runRow is one run of the ledger's runs table.
type runRow struct {
	id, mode, outcome, status, receipt, started, finished string
}

func receiptsCmd(args []string) error {
	fl := flag.NewFlagSet("receipts", flag.ExitOnError)
	ws := fl.String("ws", "", "the workspace")
	n := fl.Int("n", 0, "receipts to make")
	every := fl.Duration("every", 30*time.Minute, "time between two runs")
	fl.Parse(args)
	if *ws == "" || *n <= 0 {
		return errors.New("receipts: -ws and -n are needed")
	}
	ctx := context.Background()
	dir := filepath.Join(*ws, ".handoff", "receipts")
	idle, err := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err != nil {
		return err
	}
	var head struct {
		RunID      string    `json:"run_id"`
		StartedAt  time.Time `json:"started_at"`
		FinishedAt time.Time `json:"finished_at"`
	}
	if err := json.Unmarshal(idle, &head); err != nil {
		return fmt.Errorf("latest.json: %w", err)
	}
	ledgerPath := filepath.Join(*ws, ".handoff", "ledger.db")
	db, err := sql.Open("sqlite", ledgerPath)
	if err != nil {
		return err
	}
	var model runRow
	var first string
	err = db.QueryRowContext(ctx, `SELECT mode, Outcome, status, receipt FROM runs WHERE run_id = ?`, head.RunID).
		Scan(&model.mode, &model.outcome, &model.status, &model.receipt)
	if err == nil {
		err = db.QueryRowContext(ctx, `SELECT min(started_at) FROM runs`).Scan(&first)
	}
	db.Close()
	if err != nil {
		return fmt.Errorf("the idle run %s in the ledger: %w", head.RunID, err)
	}
	firstAt, err := time.Parse(time.RFC3339Nano, first)
	if err != nil {
		return err
	}
	took := head.FinishedAt.Sub(head.StartedAt)
	write := copier(dir, idle, head.RunID, head.StartedAt, head.FinishedAt)
	if rc, err := receipts.Decode(idle); err == nil {
		log, err := os.ReadFile(filepath.Join(dir, "latest.log"))
		if err != nil {
			return err
		}
		write = func(id string, start, finish time.Time) error {
			r := *rc
			r.RunID, r.StartedAt, r.FinishedAt = id, start.UTC(), finish.UTC()
			_, err := receipts.Write(dir, &r, log, false)
			return err
		}
	} else {
		fmt.Fprintf(os.Stderr, "bigws: this build does not read the idle run's receipt (%v): copying it byte for byte\n", err)
	}
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	rows := make([]runRow, 0, *n)
	for k := *n; k >= 1; k-- {
		start := firstAt.Add(-time.Duration(k) * *every)
		var b [3]byte
		rand.Read(b[:])
		id := start.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
		if err := write(id, start, start.Add(took)); err != nil {
			return err
		}
		r := model
		r.id, r.started, r.finished = id, stamp(start), stamp(start.Add(took))
		r.receipt = filepath.Join(filepath.Dir(model.receipt), id+".json")
		rows = append(rows, r)
	}
	return recordRuns(ctx, ledgerPath, rows)
}

// copier returns a writer of copies of the receipt idle, with the run id
// and times replaced, each its own file; no fsync (a benchmark fixture).
func copier(dir string, idle []byte, runID string, started, finished time.Time) func(id string, start, finish time.Time) error {
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	return func(id string, start, finish time.Time) error {
		data := idle
		for _, sub := range [][2]string{
			{`"run_id": "` + runID + `"`, `"run_id": "` + id + `"`},
			{`"started_at": "` + stamp(started) + `"`, `"started_at": "` + stamp(start) + `"`},
			{`"finished_at": "` + stamp(finished) + `"`, `"finished_at": "` + stamp(finish) + `"`},
		} {
			if !bytes.Contains(data, []byte(sub[0])) {
				return fmt.Errorf("latest.json: no %s", sub[0])
			}
			data = bytes.Replace(data, []byte(sub[0]), []byte(sub[1]), 1)
		}
		return os.WriteFile(filepath.Join(dir, id+".json"), data, 0o600)
	}
}

// recordRuns records rows as runs the ledger finished: with the ledger's
// own StartRun and FinishRun when this build knows the schema, else with
// the statements they make. Either way the times they write are then
// set to the rows'.
func recordRuns(ctx context.Context, path string, rows []runRow) error {
	if v, err := ledger.OpenReadOnly(path, true); err == nil {
		v.Close()
		l, err := ledger.Open(path)
		if err != nil {
			return err
		}
		defer l.Close()
		db := l.DB()
		db.SetMaxOpenConns(1) // the pragma below is the one connection's
		if _, err := db.ExecContext(ctx, `PRAGMA synchronous = OFF`); err != nil {
			return err
		}
		for _, r := range rows {
			if err := l.StartRun(ctx, r.id, r.mode); err != nil {
				return err
			}
			if err := l.FinishRun(ctx, r.id, r.outcome, r.status, r.receipt); err != nil {
				return err
			}
		}
		return setTimes(ctx, db, rows)
	} else {
		fmt.Fprintf(os.Stderr, "bigws: this build's ledger does not read the workspace's (%v): writing the runs with the same statements\n", err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, r := range rows {
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs (run_id, started_at, mode) VALUES (?, ?, ?)`, r.id, r.started, r.mode); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET finished_at = ?, Outcome = ?, status = ?, receipt = ? WHERE run_id = ?`,
			r.finished, r.outcome, r.status, r.receipt, r.id); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func setTimes(ctx context.Context, db *sql.DB, rows []runRow) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, r := range rows {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET started_at = ?, finished_at = ? WHERE run_id = ?`, r.started, r.finished, r.id); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `PRAGMA synchronous = FULL`)
	return err
}
