package claim

// IndexTracksNoInbox exposes indexTracksNoInbox to the tests.
var IndexTracksNoInbox = indexTracksNoInbox

// SetMaxEarlyEntries sets the bound on entries held by early listings,
// for one test; it returns a func that puts the old one back.
func SetMaxEarlyEntries(n int) func() {
	old := maxEarlyEntries
	maxEarlyEntries = n
	return func() { maxEarlyEntries = old }
}
