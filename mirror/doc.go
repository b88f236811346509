// Package mirror publishes canonical memory to a writer host: the cards
// and documents of the workspace, byte for byte, with a SHA256SUMS file in
// sha256sum(1) format, a MIRROR.json that says which run published them,
// and HANDOFF.md, a writer's guide made for that host. An agent on the
// host reads memory from the mirror and takes an update-card's expected
// hash from it.
//
// Guarantees, for a host whose server keeps its promises:
//
//   - Nothing outside the mirror directory is written or removed, except
//     the missing directories leading to it inside the login's home. The
//     mirror stops, with nothing touched, at a symlink on its path or in
//     it, at anything other than a regular file or directory, at a name
//     the host reports that no file of ours could have, and at a path
//     that is the login's home or above it.
//   - Every file is written under a temporary name in its directory,
//     fsynced where the server offers fsync@openssh.com, made read-only
//     (0444) and renamed over the old one with posix-rename@openssh.com.
//     A reader sees a file's old bytes or its new bytes, never a mix;
//     without posix-rename the old file is moved aside first, so for a
//     moment the name is missing, never wrong.
//   - MIRROR.json is written with "complete": false before the first
//     change and with "complete": true after the last, and SHA256SUMS is
//     written after every file it lists. A reader that finds the same
//     complete generation in MIRROR.json before and after reading has a
//     consistent copy.
//   - A crash at any point leaves every file holding its old or new bytes
//     and at most some temporary files, which the next publish removes
//     before it completes the mirror.
//   - Nothing is read from the host but listings, each bounded, so a
//     lying host cannot make the canonical host read without bound; what
//     it lies about is sent again.
//   - When nothing changed, a publish lists the mirror's directories (all
//     at once) and writes nothing.
//   - PublishHost, a host's publish as a run makes it (in its worker,
//     over the pull's connection), has the host's deadline counted
//     afresh, saves the state only when not a dry run, and turns a panic
//     into the host's error, never the run's.
//
// Whether a file is unchanged is decided as rsync's quick check does:
// by the size, mode and modification time the host lists against what
// the last publish recorded (State). A hand edit that keeps all three is
// not noticed.
package mirror
