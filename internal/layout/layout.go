// Package layout names the places in a workspace, relative to its root,
// in one small package that every step and command imports: the ingester
// writes them, the pull stores into the spool and ledger, and doctor,
// prune and where read them without depending on the ingester.
//
// Guarantees: the names are relative, slash-separated and clean, and
// every state file lives under StateDir, so a workspace's own data and
// handoff's bookkeeping never mix. FileMode and DirMode say which modes
// the places are made with: private under StateDir, where ReviewDir
// lies.
package layout

import (
	"io/fs"
	"strings"
)

// Places in a workspace.
const (
	// CardsDir holds promoted memory cards, <name>.md.
	CardsDir = "memory/cards"
	// StateDir holds everything handoff keeps for itself.
	StateDir = ".handoff"
	// ReviewDir holds review drafts, <stem>.<sha12>.md: handoffs that
	// wait for a person. It lies under StateDir, where OpenClaw never
	// looks: OpenClaw indexes every *.md under memory/ as the agent's own
	// trusted memory, with no way to exclude a path (docs/openclaw.md).
	ReviewDir = StateDir + "/review"
	// LegacyReviewDir is where versions before ReviewDir kept the drafts,
	// inside OpenClaw's memory. The ingester moves the drafts it finds
	// there to ReviewDir once (ingest.moveLegacyDrafts); nothing is ever
	// written there again.
	LegacyReviewDir = "memory/handoff-inbox"
	// SpoolDir is where versions before the ledger's store kept every
	// stored handoff, <sha256>.md, exact bytes; it is still read, never
	// written (ledger.Store).
	SpoolDir = StateDir + "/spool"
	// BackupsDir holds the prior content of every target a plan changed.
	BackupsDir = StateDir + "/backups"
	// BackupsStamp is empty; its modification time is when sync last
	// applied the backups retention, which it does once a day.
	BackupsStamp = StateDir + "/backups-retained"
	// ReceiptsDir holds one receipt per applied run, latest.json and
	// latest.log.
	ReceiptsDir = StateDir + "/receipts"
	// LedgerFile is the SQLite ledger.
	LedgerFile = StateDir + "/ledger.db"
	// IdentityFile is the workspace's identity (its id and when it was
	// made), written by `handoff init`: a directory without it (or,
	// made by an earlier handoff, without a ledger) is no workspace.
	IdentityFile = StateDir + "/workspace.json"
	// MirrorsDir holds, per mirrored host, what its last publish left on
	// the host (<host>.json).
	MirrorsDir = StateDir + "/mirrors"
	// WalksDir holds, per host, the questions its last discovery asked,
	// which the next run asks at once as it starts, and memos of the git
	// indexes it read (<host>.json).
	WalksDir = StateDir + "/walks"
	// LockFile is the single-ingester lock.
	LockFile = StateDir + "/lock"
	// IngestingFile exists from an ingester's first write into the
	// workspace until it closes with nothing left behind: the next
	// ingester that finds it removes the temporary files a crash or a
	// failure may have left, without listing every directory every run.
	IngestingFile = StateDir + "/ingesting"
)

// Modes of what handoff makes in a workspace. The private trees, StateDir
// (review drafts may hold secret-like text) and LegacyReviewDir while an
// earlier version's drafts wait to be moved, are the owner's
// alone; the umask only ever takes bits away, so it cannot widen them.
// The rest is the workspace's own content and keeps the umask's say.
const (
	PrivateFile fs.FileMode = 0o600
	PrivateDir  fs.FileMode = 0o700
	SharedFile  fs.FileMode = 0o644
	SharedDir   fs.FileMode = 0o755
)

// PrivateTrees are the directories whose whole content is private.
var PrivateTrees = []string{StateDir, LegacyReviewDir}

// Private reports whether name (relative, clean) is one of PrivateTrees or
// lies inside one.
func Private(name string) bool {
	for _, d := range PrivateTrees {
		if name == d || strings.HasPrefix(name, d+"/") {
			return true
		}
	}
	return false
}

// FileMode is the mode a new file named name is created with.
func FileMode(name string) fs.FileMode {
	if Private(name) {
		return PrivateFile
	}
	return SharedFile
}

// DirMode is the mode a new directory named name is created with.
func DirMode(name string) fs.FileMode {
	if Private(name) {
		return PrivateDir
	}
	return SharedDir
}
