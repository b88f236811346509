package ssh

import (
	"context"
	"errors"
	"sync"

	"github.com/pkg/sftp"
)

// Bounds on the handles one session keeps open on the server: files being
// read, directories being listed, and handles whose CLOSE the server has
// not yet answered. Servers limit them (Green End's sftp-server to 128,
// OpenSSH's to its descriptor limit, about 1,019), and one that runs out
// may fail in ways that look like anything else. See docs/design.md,
// "Handles in flight".
const (
	// defaultHandles is the bound for a server that does not say its own
	// limit (no limits@openssh.com): half of the smallest limit seen in
	// servers people run.
	defaultHandles = 64
	// maxHandles caps the bound a server's limits@openssh.com may raise it
	// to: past this, more concurrency buys nothing on one session.
	maxHandles = 512
	// minHandles is the least the bound is ever lowered to.
	minHandles = 4
	// exhaustedAt: an OPEN that fails, or a handle the server does not
	// know, counts as the server running out of handles only while at
	// least this many others are open.
	exhaustedAt = 8
	// openTries bounds how often one OPEN is retried after the server ran
	// out of handles.
	openTries = 8
)

// handleLimit counts the handles a session holds on the server and makes
// callers wait while the count is at the bound. A token is taken before an
// OPEN or OPENDIR and given back once the server has answered the CLOSE
// (or the open failed). A directory handle whose CLOSE the guard answered
// itself is counted in closing until the server's own answer arrives.
type handleLimit struct {
	mu      sync.Mutex
	limit   int
	held    int           // tokens taken and not given back
	closing int           // directory CLOSEs answered by the guard, not yet by the server
	peak    int           // the most held+closing ever seen
	freed   chan struct{} // closed and replaced whenever a handle is given back or the bound rises
	lowered bool          // the bound was lowered after the server ran out
}

func newHandleLimit(limit int) *handleLimit {
	return &handleLimit{limit: limit, freed: make(chan struct{})}
}

// acquire takes a token, waiting while the session is at its bound. It
// returns early, with an error, when ctx or stop ends.
func (h *handleLimit) acquire(ctx context.Context, stop <-chan struct{}) error {
	for {
		h.mu.Lock()
		if h.held+h.closing < h.limit {
			h.held++
			h.peak = max(h.peak, h.held+h.closing)
			h.mu.Unlock()
			return nil
		}
		freed := h.freed
		h.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errClosed
		}
	}
}

// release gives a token back.
func (h *handleLimit) release() {
	h.mu.Lock()
	h.held--
	h.wake()
	h.mu.Unlock()
}

// closeAnswered moves a directory handle's token to closing: the guard
// answered its CLOSE, the server has yet to. Called from the guard before
// the caller sees the answer, so the count never dips in between.
func (h *handleLimit) closeAnswered() {
	h.mu.Lock()
	h.closing++
	h.peak = max(h.peak, h.held+h.closing)
	h.mu.Unlock()
}

// closeDone: the server answered a CLOSE the guard had answered.
func (h *handleLimit) closeDone() {
	h.mu.Lock()
	h.closing--
	h.wake()
	h.mu.Unlock()
}

// setLimit sets the bound the server says it allows (limits@openssh.com),
// unless the server has already been seen to run out.
func (h *handleLimit) setLimit(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lowered {
		return
	}
	h.limit = max(minHandles, min(n, maxHandles))
	h.wake()
}

// exhausted reports whether a failure of an OPEN (or of the first request
// on a new handle) while the caller holds one token looks like the server
// running out of handles, and if so lowers the bound below what was open.
func (h *handleLimit) exhausted(err error) bool {
	var se *sftp.StatusError
	if !errors.As(err, &se) || se.FxCode() != sftp.ErrSSHFxFailure {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	others := h.held + h.closing - 1
	if others < exhaustedAt {
		return false
	}
	// Three quarters of what was open: a margin for the server's own
	// count, and stable when many opens fail at once.
	h.limit = max(minHandles, min(h.limit, others*3/4))
	h.lowered = true
	return true
}

// wake tells the waiters to look again. The caller holds h.mu.
func (h *handleLimit) wake() {
	close(h.freed)
	h.freed = make(chan struct{})
}

// stats returns the bound and the most handles held at once so far.
func (h *handleLimit) stats() (limit, peak int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.limit, h.peak
}
