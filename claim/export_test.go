package claim

// IndexTracksNoInbox exposes indexTracksNoInbox to the tests.
var IndexTracksNoInbox = indexTracksNoInbox
