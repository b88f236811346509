package durable

import "golang.org/x/sys/unix"

// renameNoReplace is renameat2(2) with RENAME_NOREPLACE.
func renameNoReplace(olddfd int, oldname string, newdfd int, newname string) error {
	if forceNoRenameFlags {
		return unix.EINVAL
	}
	return unix.Renameat2(olddfd, oldname, newdfd, newname, unix.RENAME_NOREPLACE)
}

// exchange swaps two names in the directory dfd in one step:
// renameat2(2) with RENAME_EXCHANGE.
func exchange(dfd int, a, b string) error {
	if forceNoRenameFlags {
		return unix.EINVAL
	}
	return unix.Renameat2(dfd, a, dfd, b, unix.RENAME_EXCHANGE)
}
