package durable

import (
	"errors"

	"golang.org/x/sys/unix"
)

// RenameNoReplace renames oldname (relative to the directory olddfd) to
// newname (relative to newdfd) and never replaces newname: it fails
// with unix.EEXIST when newname exists. It uses renameat2's
// RENAME_NOREPLACE on Linux and renameatx_np's RENAME_EXCL on macOS.
// Where there is no such rename (NFS, 9p and FUSE without RENAME2
// refuse the flag; FreeBSD has none), it links newname, which link(2)
// refuses when it exists, then unlinks oldname: an interruption between
// the two leaves both names on the same inode, never a replaced file.
// The fallback holds for regular files only, as link(2) does. Either
// dfd may be unix.AT_FDCWD.
func RenameNoReplace(olddfd int, oldname string, newdfd int, newname string) error {
	err := error(unix.EINVAL)
	if !forceNoRenameFlags {
		err = renameNoReplaceSys(olddfd, oldname, newdfd, newname)
	}
	if !cannotRename(err) {
		return err
	}
	if err := unix.Linkat(olddfd, oldname, newdfd, newname, 0); err != nil {
		return err
	}
	return unix.Unlinkat(olddfd, oldname, 0)
}

// exchange swaps two names in the directory dfd in one step, where the
// system and the file system can (see cannotRename).
func exchange(dfd int, a, b string) error {
	if forceNoRenameFlags {
		return unix.EINVAL
	}
	return exchangeSys(dfd, a, b)
}

// cannotRename reports whether err says the system or the file system
// has no such rename, as opposed to a failure of this one.
func cannotRename(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) ||
		errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP)
}

// forceNoRenameFlags makes tests take the paths for systems without
// flagged renames on a system that has them.
var forceNoRenameFlags bool
