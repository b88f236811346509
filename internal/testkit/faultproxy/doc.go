// Package faultproxy is a TCP proxy for network-fault tests. It listens on
// 127.0.0.1:0, forwards every accepted connection to one target, and
// injects faults into each connection as its Plan says: added latency,
// throttling, a stall of one direction, a black hole (both directions
// silently dropped while the sockets stay open), a reset (RST), or a
// silent accept that never reaches the target at all.
//
// Guarantees:
//
//   - Byte triggers are exact. A fault armed at "Down: 100" lets exactly
//     100 bytes reach the client (a read that crosses the threshold is
//     split), so a test that measured a byte count in one run can put a
//     fault at the same point of an identical byte stream in the next.
//   - Once a fault fires it stays in force for the life of the connection,
//     and the time and byte counts at which it fired are recorded.
//   - The proxy never closes a connection on its own except for a Reset
//     fault, or when both ends are done. A stalled or black-holed
//     connection stays open until a peer closes it or Close is called.
//   - Close stops accepting, closes every connection (which unblocks every
//     stalled transfer) and returns only when every goroutine the proxy
//     started has ended.
//
// The proxy sees only bytes: it knows nothing of the protocol it carries.
// It keeps each connection's chunk trace and the first HeadSize bytes of
// each direction, so a test can read a clear-text protocol opening off the
// bytes themselves (chunk boundaries are an accident of scheduling).
// For faults tied to a protocol event it cannot see (an SSH packet inside
// the encrypted stream), use a Trigger.When predicate that looks at a side
// effect of the event, or a byte count measured in a calibration run.
package faultproxy
