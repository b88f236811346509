// Package repoid tells which repository a directory on a host is, so that
// clones of one repository on different hosts are known as one: by the
// normalized URL of its origin remote, read from the repository's own git
// configuration through a transport.FS, else by the host and the path.
//
// Guarantees:
//   - Reads are bounded: a ".git" file and a "commondir" file at 4 KiB,
//     the configuration at 64 KiB; nothing bigger is read. A ".git" that
//     is a symlink, a configuration that is not a regular file, not UTF-8
//     or holds NUL bytes is never followed or parsed, and the reason is
//     given as the Identity's Problem. Read never panics and never fails
//     the caller: whatever the host holds, it returns an Identity.
//   - A normalized origin holds no credentials (the user and password of
//     a URL are dropped), no control characters, and is at most MaxKey
//     bytes. Two spellings of one remote normalize alike: the scheme,
//     user, port, a trailing ".git" and slashes go, the host is
//     lowercased, and git's scp-like form (git@host:org/repo) equals the
//     URL form (https://host/org/repo). On GitHub, GitLab.com and
//     Bitbucket Cloud, whose paths are case-insensitive, the path is
//     lowercased too (github.com/Org/Repo is github.com/org/repo).
//   - A local origin (a path, or file://) names no repository across
//     hosts and normalizes to nothing: such a clone is known by its host
//     and path.
package repoid
