package ledger

import "sync"

// freshMax bounds the bytes a ledger keeps in fresh: a little more than
// one ingest batch's worth of handoffs (1,024 of a few KiB), so that an
// ingester that lags behind the pulls costs table reads, not memory.
const freshMax = 8 << 20

// freshContents holds the bytes this process's own transactions have
// committed to the contents table, until Store.Get takes them. The
// ingester reads each handoff moments after its pull stored it; taking
// the bytes from here spares a lookup in the contents table, whose
// random-keyed pages cost reads that grow with the memory (issue 34).
// An entry is added only after its transaction committed, so it holds
// exactly what the table holds under that hash; Get checks the hash of
// whatever it returns all the same.
type freshContents struct {
	mu    sync.Mutex
	m     map[string][]byte
	bytes int
}

// add keeps committed contents while they fit in freshMax.
func (f *freshContents) add(contents map[string][]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for sha, data := range contents {
		if _, ok := f.m[sha]; ok || f.bytes+len(data) > freshMax {
			continue
		}
		if f.m == nil {
			f.m = make(map[string][]byte)
		}
		f.m[sha] = data
		f.bytes += len(data)
	}
}

// take removes and returns the bytes kept for sha.
func (f *freshContents) take(sha string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, ok := f.m[sha]
	if ok {
		delete(f.m, sha)
		f.bytes -= len(data)
	}
	return data, ok
}

// drop forgets the bytes of these hashes (their rows were deleted).
func (f *freshContents) drop(shas []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sha := range shas {
		if data, ok := f.m[sha]; ok {
			delete(f.m, sha)
			f.bytes -= len(data)
		}
	}
}
