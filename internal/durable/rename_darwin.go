package durable

import "golang.org/x/sys/unix"

// renameNoReplace is renameatx_np(2) with RENAME_EXCL.
func renameNoReplace(olddfd int, oldname string, newdfd int, newname string) error {
	if forceNoRenameFlags {
		return unix.ENOTSUP
	}
	return unix.RenameatxNp(olddfd, oldname, newdfd, newname, unix.RENAME_EXCL)
}

// exchange swaps two names in the directory dfd in one step:
// renameatx_np(2) with RENAME_SWAP.
func exchange(dfd int, a, b string) error {
	if forceNoRenameFlags {
		return unix.ENOTSUP
	}
	return unix.RenameatxNp(dfd, a, dfd, b, unix.RENAME_SWAP)
}
