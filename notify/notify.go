package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// Defaults for [Options].
const (
	DefaultRetries = 3
	DefaultTotal   = 10 * time.Second
)

// Backoff bounds between attempts: the wait doubles from the minimum and
// never exceeds the maximum. Retry-After is ignored: a heartbeat is not
// worth waiting long for.
const (
	retryWaitMin = 250 * time.Millisecond
	retryWaitMax = 2 * time.Second
)

// ErrInvalidURL means a ping URL is not an absolute http or https URL.
var ErrInvalidURL = errors.New("not an http or https URL")

// Options configure a [Pinger]. The zero value is usable.
type Options struct {
	// Retries is how many times a failed attempt (a connection error or a
	// 5xx answer) is retried. 0 means DefaultRetries; negative means none.
	Retries int
	// Total bounds one ping, every attempt and wait included. 0 means
	// DefaultTotal.
	Total time.Duration
	// Log receives one debug record per attempt; nil discards.
	Log *slog.Logger
	// HTTPClient sends the requests (tests); nil means a client of its own
	// that honours the proxy environment variables. Its Timeout, if set,
	// further bounds each attempt.
	HTTPClient *http.Client
}

// Pinger pings one healthchecks.io-style URL. It is safe for concurrent use.
type Pinger struct {
	base, start, fail *url.URL
	retries           int
	total             time.Duration
	log               *slog.Logger
	hc                *http.Client // per-attempt Timeout set
}

// New returns a Pinger for rawURL, which must be an absolute http or https
// URL such as https://hc-ping.com/<uuid>.
func New(rawURL string, opts Options) (*Pinger, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		shown := rawURL
		if err == nil {
			shown = u.Redacted()
		}
		return nil, fmt.Errorf("notify: ping URL %q: %w", shown, ErrInvalidURL)
	}
	u.Fragment, u.RawFragment = "", ""
	p := &Pinger{
		base:    u,
		start:   u.JoinPath("start"),
		fail:    u.JoinPath("fail"),
		retries: opts.Retries,
		total:   opts.Total,
		log:     opts.Log,
	}
	if p.retries == 0 {
		p.retries = DefaultRetries
	} else if p.retries < 0 {
		p.retries = 0
	}
	if p.total <= 0 {
		p.total = DefaultTotal
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	var hc http.Client
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient
	} else {
		hc.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if per := attemptTimeout(p.total, p.retries); hc.Timeout <= 0 || per < hc.Timeout {
		hc.Timeout = per
	}
	p.hc = &hc
	return p, nil
}

// attemptTimeout shares the total among the attempts, but gives each at
// least 2s (or the whole total, if that is less): a slow answer is still
// an answer.
func attemptTimeout(total time.Duration, retries int) time.Duration {
	per := total / time.Duration(retries+1)
	return max(per, min(2*time.Second, total))
}

// URL returns the base ping URL with any password redacted.
func (p *Pinger) URL() string { return p.base.Redacted() }

// Start pings URL/start: the run has begun.
func (p *Pinger) Start(ctx context.Context) error {
	return p.ping(ctx, p.start, "")
}

// Finish pings URL (ok) or URL/fail (not ok) with summary as the body.
// It goes out even when ctx is already done: a run stopped by SIGINT or
// SIGTERM ends with a cancelled context, and the monitor must still hear
// how it ended. Options.Total alone bounds it then.
func (p *Pinger) Finish(ctx context.Context, ok bool, summary string) error {
	ctx = context.WithoutCancel(ctx)
	if ok {
		return p.ping(ctx, p.base, summary)
	}
	return p.ping(ctx, p.fail, summary)
}

// Error is a failed ping.
type Error struct {
	URL      string // redacted
	Attempts int
	Status   string // the last answer's status line, when there was one
	Err      error  // the last error, when there was no answer
	Timeout  time.Duration
}

func (e *Error) Error() string {
	n := fmt.Sprintf("%d attempts", e.Attempts)
	if e.Attempts == 1 {
		n = "1 attempt"
	}
	switch {
	case e.Attempts == 0:
		return fmt.Sprintf("ping %s: %v", e.URL, e.Err)
	case e.Status != "":
		return fmt.Sprintf("ping %s: %s after %s", e.URL, e.Status, n)
	case errors.Is(e.Err, context.DeadlineExceeded) && e.Timeout > 0:
		return fmt.Sprintf("ping %s: no answer within %v (%s)", e.URL, e.Timeout, n)
	default:
		return fmt.Sprintf("ping %s: %v after %s", e.URL, e.Err, n)
	}
}

func (e *Error) Unwrap() error { return e.Err }

// ping POSTs body to u, retrying as the package documents.
func (p *Pinger) ping(ctx context.Context, u *url.URL, body string) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.total)
	defer cancel()
	target := u.Redacted()
	attempts := 0
	c := &retryablehttp.Client{
		HTTPClient:   p.hc,
		RetryWaitMin: retryWaitMin,
		RetryWaitMax: retryWaitMax,
		RetryMax:     p.retries,
		CheckRetry:   checkRetry,
		Backoff: func(lo, hi time.Duration, n int, _ *http.Response) time.Duration {
			return retryablehttp.DefaultBackoff(lo, hi, n, nil)
		},
		RequestLogHook: func(_ retryablehttp.Logger, _ *http.Request, i int) {
			attempts = i + 1
			p.log.Debug("heartbeat ping", "url", target, "attempt", attempts)
		},
		ResponseLogHook: func(_ retryablehttp.Logger, r *http.Response) {
			p.log.Debug("heartbeat answer", "url", target, "status", r.Status)
		},
		// Hand back the last answer or error as they are; ping words the error.
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, u.String(), []byte(body))
	if err != nil {
		return &Error{URL: target, Err: err}
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("User-Agent", "handoff")
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() != nil && parent.Err() == nil {
			// Our own deadline, whatever the transport made of it.
			return &Error{URL: target, Attempts: attempts, Err: context.DeadlineExceeded, Timeout: p.total}
		}
		return &Error{URL: target, Attempts: attempts, Err: err}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &Error{URL: target, Attempts: attempts, Status: resp.Status}
	}
	return nil
}

// checkRetry retries connection errors (but not certificate or protocol
// errors) and 5xx answers, and nothing once the deadline has passed.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, nil
	}
	if err != nil {
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	return resp.StatusCode == 0 || (resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented), nil
}
