// Package notify is the heartbeat: it pings a healthchecks.io-style URL
// when a run starts and when it ends.
//
// The protocol is healthchecks.io's: POST URL/start when a run begins, POST
// URL with the run's summary as a text/plain body when it ends ok, and POST
// URL/fail with the summary otherwise. Any query string of the URL is kept.
//
// Guarantees:
//   - One ping never takes longer than Options.Total, retries and backoff
//     included. Start never takes longer than the caller's context
//     allows; Finish is sent even after the caller's context was
//     cancelled (an interrupted run still reports how it ended), within
//     Options.Total.
//   - Connection errors and 5xx answers are retried at most Options.Retries
//     times with a short, capped backoff; 4xx answers and TLS certificate
//     errors are not retried.
//   - Every failure is returned as an error naming the URL (with any
//     password redacted) and what went wrong; nothing panics and nothing is
//     logged above debug level, so the caller decides how loud to be.
//
// A *Pinger satisfies handoff.Notifier. This package does not import the
// root package; the conformance check lives in its tests.
package notify
