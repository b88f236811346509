package e2e

// The heartbeat (SPEC "Heartbeat"): the built binary pings an httptest
// server that plays healthchecks.io.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pingServer records every request it gets; with hang set it never answers
// (until the test ends).
type pingServer struct {
	url  string // the check's ping URL
	mu   sync.Mutex
	hits []pingHit
}

type pingHit struct{ method, path, body string }

func startPingServer(t *testing.T, hang bool) *pingServer {
	t.Helper()
	ps := &pingServer{}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ps.mu.Lock()
		ps.hits = append(ps.hits, pingHit{r.Method, r.URL.Path, string(b)})
		ps.mu.Unlock()
		if hang {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		io.WriteString(w, "OK")
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for handlers
	ps.url = srv.URL + "/0b6e5a52-check"
	return ps
}

func (ps *pingServer) got() []pingHit {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]pingHit(nil), ps.hits...)
}

// closedURL is an http URL on a port nobody listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/check"
}

// heartbeatWorld is newWorld with every handoff kind waiting, a fresh HOME,
// and manifest lines appended (more hosts, a notify block).
func heartbeatWorld(t *testing.T, extra string) (*world, []string) {
	t.Helper()
	w := newWorld(t)
	w.mixed()
	if extra != "" {
		f, err := os.OpenFile(w.manifest, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(extra)
		f.Close()
	}
	home := filepath.Join(w.dir, "home")
	mustMkdir(t, home)
	return w, childEnv(home)
}

// TestHeartbeatOK: a successful run pings URL/start, then URL with the
// summary it printed as the body, and records notify ok. The URL comes
// from the manifest. A dry run pings nothing.
func TestHeartbeatOK(t *testing.T) {
	ps := startPingServer(t, false)
	w, env := heartbeatWorld(t, "notify: {ping_url: "+ps.url+"}\n")

	dry := runHandoff(t, env, "sync", "--manifest", w.manifest, "--dry-run")
	if dry.code != 0 {
		t.Fatalf("dry run: %v", dry)
	}
	if hits := ps.got(); len(hits) != 0 {
		t.Fatalf("a dry run pinged: %+v", hits)
	}

	r := runHandoff(t, env, "sync", "--manifest", w.manifest)
	if r.code != 0 {
		t.Fatalf("sync: %v", r)
	}
	hits := ps.got()
	if len(hits) != 2 {
		t.Fatalf("%d pings, want 2 (start, success): %+v", len(hits), hits)
	}
	if hits[0].method != http.MethodPost || hits[0].path != "/0b6e5a52-check/start" {
		t.Errorf("first ping %s %s, want POST .../start", hits[0].method, hits[0].path)
	}
	if hits[1].method != http.MethodPost || hits[1].path != "/0b6e5a52-check" {
		t.Errorf("last ping %s %s, want POST to the ping URL itself", hits[1].method, hits[1].path)
	}
	if !strings.HasPrefix(hits[1].body, "Pulled 10  Promoted 3") || hits[1].body != r.stdout {
		t.Errorf("success ping body %q, want the summary the run printed %q", hits[1].body, r.stdout)
	}
	rc := latestReceipt(t, w.ws)
	if !rc.Notify.OK || rc.Notify.Error != "" {
		t.Errorf("receipt notify %+v, want ok", rc.Notify)
	}
}

// TestHeartbeatFail: a run whose host fails (an ssh host on a closed port)
// pings URL/fail with the summary; --ping overrides the manifest's URL.
func TestHeartbeatFail(t *testing.T) {
	ps := startPingServer(t, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	w, env := heartbeatWorld(t, fmt.Sprintf("  - name: gone\n    transport: ssh\n    ssh: {host: 127.0.0.1, port: %d, connect_timeout: 5s}\n    inboxes: [/srv/gone/.claude/memory-handoffs]\n"+
		"notify: {ping_url: %s}\n", port, closedURL(t)))

	r := runHandoff(t, env, "sync", "--manifest", w.manifest, "--ping", ps.url)
	if r.code != 1 {
		t.Fatalf("sync exit %d, want 1 (partial): %v", r.code, r)
	}
	hits := ps.got()
	if len(hits) != 2 || hits[0].path != "/0b6e5a52-check/start" || hits[1].path != "/0b6e5a52-check/fail" {
		t.Fatalf("pings %+v, want start then fail", hits)
	}
	if hits[1].body != r.stdout || !strings.HasPrefix(hits[1].body, "Pulled 10 ") {
		t.Errorf("fail ping body %q, want the summary %q", hits[1].body, r.stdout)
	}
	rc := latestReceipt(t, w.ws)
	if rc.Outcome != "partial" || !rc.Notify.OK {
		t.Errorf("receipt outcome %s notify %+v", rc.Outcome, rc.Notify)
	}
}

// TestHeartbeatDown: a ping server that refuses connections never fails
// the run; the receipt records why the heartbeat failed.
func TestHeartbeatDown(t *testing.T) {
	w, env := heartbeatWorld(t, "")
	url := closedURL(t)
	r := runHandoff(t, env, "sync", "--manifest", w.manifest, "--ping", url, "--ping-timeout", "5s")
	if r.code != 0 {
		t.Fatalf("sync exit %d, want 0 despite the heartbeat: %v", r.code, r)
	}
	if !strings.HasPrefix(r.stdout, "Pulled 10  Promoted 3") {
		t.Errorf("stdout %q", r.stdout)
	}
	rc := latestReceipt(t, w.ws)
	if rc.Outcome != "ok" || rc.Notify.OK {
		t.Fatalf("receipt outcome %s notify %+v, want ok with notify.ok false", rc.Outcome, rc.Notify)
	}
	if !strings.Contains(rc.Notify.Error, "ping "+url+"/start") || !strings.Contains(rc.Notify.Error, "refused") {
		t.Errorf("notify error %q, want the start ping's refusal", rc.Notify.Error)
	}
	w.checkConverged(nil, mixedResults)
}

// TestHeartbeatHang: a ping server that never answers delays the run by
// at most --ping-timeout per ping (start and finish), and the run still
// succeeds.
func TestHeartbeatHang(t *testing.T) {
	ps := startPingServer(t, true)
	w, env := heartbeatWorld(t, "")
	const timeout = 2 * time.Second
	r := runHandoff(t, env, "sync", "--manifest", w.manifest, "--ping", ps.url, "--ping-timeout", timeout.String())
	if r.code != 0 {
		t.Fatalf("sync exit %d, want 0: %v", r.code, r)
	}
	// Two pings, each bounded by the timeout; a sync of this world takes
	// well under the slack.
	if r.elapsed < 2*timeout || r.elapsed > 2*timeout+5*time.Second {
		t.Fatalf("sync took %v, want between %v and %v", r.elapsed, 2*timeout, 2*timeout+5*time.Second)
	}
	if len(ps.got()) < 2 {
		t.Errorf("server saw %d pings, want start and finish", len(ps.got()))
	}
	rc := latestReceipt(t, w.ws)
	if rc.Outcome != "ok" || rc.Notify.OK || !strings.Contains(rc.Notify.Error, "no answer within 2s") {
		t.Fatalf("receipt outcome %s notify %+v", rc.Outcome, rc.Notify)
	}
	w.checkConverged(nil, mixedResults)
}

// TestHeartbeatBadURL: a --ping that is not an http(s) URL is a usage
// error; nothing is pulled.
func TestHeartbeatBadURL(t *testing.T) {
	w, env := heartbeatWorld(t, "")
	for _, args := range [][]string{{"--ping", "ftp://example.com/x"}, {"--ping", "http://127.0.0.1:1/x", "--ping-timeout", "0s"}} {
		r := runHandoff(t, env, append([]string{"sync", "--manifest", w.manifest}, args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "handoff: ") {
			t.Errorf("%v: %v, want exit 2 with a message", args, r)
		}
	}
	if n := len(mustGlob(t, filepath.Join(w.inboxes[0], "*.md"))); n != 8 {
		t.Fatalf("%d handoffs left in the inbox, want all 8 untouched", n)
	}
}

// TestHeartbeatStartOverlapsTheRun: the start ping goes out while the run
// works. The ping server answers /start only once the run has archived a
// handoff (or after 20 s): a run that waited for that answer before it
// pulled would be held the whole time and archive nothing meanwhile. The
// finish ping still comes after the start ping's answer.
func TestHeartbeatStartOverlapsTheRun(t *testing.T) {
	w, env := heartbeatWorld(t, "")
	processed := filepath.Join(w.inboxes[0], "processed")
	var mu sync.Mutex
	var answered []string
	pulledFirst := false
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		if strings.HasSuffix(r.URL.Path, "/start") {
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if ents, _ := os.ReadDir(processed); len(ents) > 0 {
					pulledFirst = true
					break
				}
			}
		}
		mu.Lock()
		answered = append(answered, r.URL.Path)
		mu.Unlock()
		io.WriteString(rw, "OK")
	}))
	defer srv.Close()
	r := runHandoff(t, env, "sync", "--manifest", w.manifest, "--ping", srv.URL+"/check", "--ping-timeout", "30s")
	if r.code != 0 {
		t.Fatalf("sync exit %d: %v", r.code, r)
	}
	mu.Lock()
	defer mu.Unlock()
	if !pulledFirst {
		t.Error("nothing was archived while the start ping waited for its answer: the run held its pulls for it")
	}
	if len(answered) != 2 || answered[0] != "/check/start" || answered[1] != "/check" {
		t.Errorf("pings answered %v, want /check/start, then /check", answered)
	}
	if rc := latestReceipt(t, w.ws); rc.Outcome != "ok" || !rc.Notify.OK {
		t.Errorf("receipt outcome %s notify %+v", rc.Outcome, rc.Notify)
	}
	w.checkConverged(nil, mixedResults)
}

// TestHeartbeatInterrupted: a run stopped by SIGINT mid-pull still sends
// its finish ping, to URL/fail, after the start ping (issue 48, item 16:
// the ping used the run's cancelled context and never left). Invariant:
// the monitor hears how every run that started ended, interrupted ones
// included, and the receipt says the ping went out.
func TestHeartbeatInterrupted(t *testing.T) {
	ps := startPingServer(t, false)
	w, env := heartbeatWorld(t, "notify: {ping_url: "+ps.url+"}\n")
	const fp = "store.recorded@1"
	stderr, err := interruptedSync(t, env, w.manifest, fp)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("interrupted sync: %v, want exit 1\n%s", err, stderr)
	}
	hits := ps.got()
	if len(hits) != 2 || hits[0].path != "/0b6e5a52-check/start" || hits[1].path != "/0b6e5a52-check/fail" {
		t.Fatalf("pings %+v, want /start, then /fail", hits)
	}
	if !strings.HasPrefix(hits[1].body, "Pulled ") {
		t.Errorf("fail ping body %q, want the run's summary", hits[1].body)
	}
	if rc := latestReceipt(t, w.ws); !rc.Interrupted || !rc.Notify.OK {
		t.Errorf("receipt interrupted %v notify %+v, want an interrupted run whose ping went out", rc.Interrupted, rc.Notify)
	}
}
