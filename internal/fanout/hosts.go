package fanout

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// Bounds of the hosts a sync pulls at once by default.
const (
	// WorkerBudget is the memory one host's pull worker is counted at. A
	// worker's measured peak RSS is 15-21 MiB at an idle tick and on
	// hostile hosts (docs/RELIABILITY.md), and gctune aims its heap at
	// 32 MiB while it pulls a bulk host: 64 MiB covers both twice.
	WorkerBudget = 64 << 20
	// MinHosts is the fewest hosts pulled at once when a fleet has them:
	// the default before the bound followed the machine.
	MinHosts = 8
	// MaxHosts caps the hosts pulled at once, whatever the memory.
	MaxHosts = 64
)

// HostsAtOnce is how many of hosts a sync pulls at once by default: every
// host, bounded by half of the available memory at WorkerBudget a worker
// (available 0: unknown), never more than MaxHosts, never fewer than
// MinHosts (or hosts, when fewer).
func HostsAtOnce(hosts int, available uint64) int {
	bound := MinHosts
	if available > 0 {
		bound = int(min(uint64(MaxHosts), max(uint64(MinHosts), available/2/WorkerBudget)))
	}
	return max(1, min(hosts, bound))
}

// Available returns the memory available to new processes, from Linux's
// /proc/meminfo (MemAvailable), or 0 where that cannot be read.
func Available() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 3 && string(f[0]) == "MemAvailable:" && string(f[2]) == "kB" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
