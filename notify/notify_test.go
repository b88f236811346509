package notify_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/notify"
)

// A Pinger is the heartbeat Sync expects.
var _ handoff.Notifier = (*notify.Pinger)(nil)

// hit is one request a test server saw.
type hit struct {
	method, path, query, body, contentType string
}

// recorder is a test server that answers with statuses in turn (200 once
// they run out) and records every request.
type recorder struct {
	mu       sync.Mutex
	hits     []hit
	statuses []int
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.hits = append(rec.hits, hit{r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Get("Content-Type")})
	status := http.StatusOK
	if len(rec.statuses) > 0 {
		status, rec.statuses = rec.statuses[0], rec.statuses[1:]
	}
	rec.mu.Unlock()
	w.WriteHeader(status)
	io.WriteString(w, "OK")
}

func (rec *recorder) got() []hit {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]hit(nil), rec.hits...)
}

func serve(t *testing.T, statuses ...int) (*recorder, string) {
	t.Helper()
	rec := &recorder{statuses: statuses}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return rec, srv.URL + "/ping/abc-123"
}

func newPinger(t *testing.T, url string, opts notify.Options) *notify.Pinger {
	t.Helper()
	p, err := notify.New(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProtocol: start, success and failure go to URL/start, URL and
// URL/fail; the summary is the text/plain body; a query string is kept.
func TestProtocol(t *testing.T) {
	cases := []struct {
		name     string
		call     func(*notify.Pinger) error
		wantPath string
		wantBody string
	}{
		{"start", func(p *notify.Pinger) error { return p.Start(t.Context()) }, "/ping/abc-123/start", ""},
		{"ok", func(p *notify.Pinger) error { return p.Finish(t.Context(), true, "Pulled 1\n") }, "/ping/abc-123", "Pulled 1\n"},
		{"fail", func(p *notify.Pinger) error { return p.Finish(t.Context(), false, "Pulled 0\nNO_UPDATES\n") }, "/ping/abc-123/fail", "Pulled 0\nNO_UPDATES\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, url := serve(t)
			if err := tc.call(newPinger(t, url+"?create=1", notify.Options{})); err != nil {
				t.Fatal(err)
			}
			hits := rec.got()
			if len(hits) != 1 {
				t.Fatalf("%d requests, want 1: %+v", len(hits), hits)
			}
			h := hits[0]
			if h.method != http.MethodPost || h.path != tc.wantPath || h.query != "create=1" || h.body != tc.wantBody {
				t.Errorf("got %s %s?%s body %q; want POST %s?create=1 body %q", h.method, h.path, h.query, h.body, tc.wantPath, tc.wantBody)
			}
			if !strings.HasPrefix(h.contentType, "text/plain") {
				t.Errorf("Content-Type %q", h.contentType)
			}
		})
	}
}

// TestRetries5xx: two 5xx answers, then 200: success in exactly 3 requests.
func TestRetries5xx(t *testing.T) {
	rec, url := serve(t, http.StatusServiceUnavailable, http.StatusBadGateway)
	if err := newPinger(t, url, notify.Options{}).Finish(t.Context(), true, "s"); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if n := len(rec.got()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	for _, h := range rec.got() {
		if h.body != "s" {
			t.Errorf("retry sent body %q, want the summary each time", h.body)
		}
	}
}

// TestRetriesExhausted: a server that always answers 503 is tried
// 1+Retries times and the error says so.
func TestRetriesExhausted(t *testing.T) {
	rec, url := serve(t, 503, 503, 503, 503, 503)
	err := newPinger(t, url, notify.Options{Retries: 2}).Finish(t.Context(), false, "s")
	if err == nil {
		t.Fatal("no error")
	}
	if n := len(rec.got()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	want := "ping " + url + "/fail: 503 Service Unavailable after 3 attempts"
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	var pe *notify.Error
	if !errors.As(err, &pe) || pe.Attempts != 3 {
		t.Fatalf("error %#v", err)
	}
}

// TestNo4xxRetry: a 4xx answer is final.
func TestNo4xxRetry(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusTooManyRequests} {
		rec, url := serve(t, status, status)
		err := newPinger(t, url, notify.Options{}).Start(t.Context())
		if err == nil || !strings.Contains(err.Error(), http.StatusText(status)+" after 1 attempt") {
			t.Errorf("%d: error %v", status, err)
		}
		if n := len(rec.got()); n != 1 {
			t.Errorf("%d: %d requests, want 1 (no retry)", status, n)
		}
	}
}

// TestRefused: a closed port is retried, then reported as refused.
func TestRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	err = newPinger(t, "http://"+addr+"/x", notify.Options{Retries: 2}).Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("error %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

// TestHangingServer: a server that never answers cannot hold a ping past
// Total, retries and backoff included.
func TestHangingServer(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close

	const total = time.Second
	p := newPinger(t, srv.URL, notify.Options{Total: total})
	start := time.Now()
	err := p.Finish(t.Context(), true, "s")
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("no error from a server that never answers")
	}
	if elapsed > total+2*time.Second {
		t.Fatalf("Finish took %v, want at most %v + 2s", elapsed, total)
	}
	if !strings.Contains(err.Error(), "no answer within 1s") {
		t.Errorf("error %q", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
	if requests.Load() == 0 {
		t.Error("the server saw no request")
	}
}

// TestCallerContext: a cancelled caller context stops the ping at once.
func TestCallerContext(t *testing.T) {
	_, url := serve(t, 503, 503, 503, 503)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	err := newPinger(t, url, notify.Options{}).Start(ctx)
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
}

// TestFinishAfterCancel: the run's context is cancelled by SIGINT before
// the finish ping; the ping still reaches the monitor (issue 48, item
// 16). Invariant: an interrupted run's end is never silent to the
// monitor while it answers.
func TestFinishAfterCancel(t *testing.T) {
	rec, url := serve(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := newPinger(t, url, notify.Options{}).Finish(ctx, false, "interrupted"); err != nil {
		t.Fatalf("Finish after cancel: %v", err)
	}
	if got := rec.got(); len(got) != 1 || got[0].path != "/ping/abc-123/fail" || got[0].body != "interrupted" {
		t.Fatalf("the monitor saw %+v, want one /fail with the summary", got)
	}
}

// TestFinishAfterCancelIsBounded: that finish ping still ends within
// Options.Total when the monitor does not answer. A server that never
// answers, and a Total of 50ms; the test waits for the error, not a
// clock.
func TestFinishAfterCancelIsBounded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(func() { close(release); srv.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := newPinger(t, srv.URL, notify.Options{Total: 50 * time.Millisecond, Retries: -1}).Finish(ctx, true, "")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the ping's own deadline", err)
	}
}

func TestNewRejects(t *testing.T) {
	for _, u := range []string{"", "hc-ping.com/x", "ftp://hc-ping.com/x", "file:///etc/passwd", "https://", "://x", "https://user:secret@:80/x"} {
		_, err := notify.New(u, notify.Options{})
		if !errors.Is(err, notify.ErrInvalidURL) {
			t.Errorf("New(%q) = %v, want ErrInvalidURL", u, err)
		}
	}
	p, err := notify.New("https://user:secret@hc.example/ping/x", notify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.URL(), "secret") {
		t.Errorf("URL() shows the password: %s", p.URL())
	}
}

// TestErrorRedactsPassword: a password in the URL never reaches an error.
func TestErrorRedactsPassword(t *testing.T) {
	_, url := serve(t, 404)
	url = strings.Replace(url, "http://", "http://u:secret@", 1)
	err := newPinger(t, url, notify.Options{}).Start(t.Context())
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %v", err)
	}
}
