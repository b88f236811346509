// Package worker is how a run pulls its hosts: each host's pull in a
// process of its own (a child of the same binary, started with the
// hidden subcommand Command; Puller), the protocol between the run and
// that process (Serve on the worker's side), and the run's one writer of
// what the pulls record (RecordQueue).
//
// The protocol: the parent writes a Job (JSON) to the worker's stdin and
// the worker answers with its claim.HostReport on stdout; for a host with
// a mirror, the parent then writes a mirror.Job and the worker answers
// with the mirror.Result, over the pull's connection (EOF on stdin: do
// not publish). The worker's logs are JSON lines on stderr, relayed into
// the run's log. What it stores and archives it records through the run
// over its records connection (a socket pair, descriptor 3 in the
// worker): frames of a 4-byte length and JSON, each call with an id.
//
// Guarantees:
//   - A worker that crashes, hangs or sends garbage fails its host, never
//     the run: its process group is killed once the host's deadline and
//     a grace have passed, and what the parent reads from it is bounded
//     (a report of 16 MiB, a log line of 4 KiB, two JSON values, a
//     records frame of 16 MiB). On Linux a worker is started with
//     SIGKILL as its parent-death signal.
//   - The run is the ledger's one writer for its pulls: a batch is
//     recorded only through RecordQueue, and a pull learns it is recorded
//     only once the transaction holding it has committed, so no remote
//     copy is archived before its record is durable. When the records
//     connection ends, every call waiting on it fails; none is taken for
//     an answer.
//   - A host's recorder takes only that host's sources, so a worker gone
//     wrong cannot record or archive another host's files; names cross
//     the records connection byte for byte, invalid UTF-8 included.
//   - What each host's pull stored and archived is counted from the
//     committed writes (RecordedFor), whatever became of its worker.
//   - A panic in a worker while it dials, pulls or publishes is that
//     host's error.
package worker
