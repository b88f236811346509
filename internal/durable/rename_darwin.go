package durable

import "golang.org/x/sys/unix"

// renameNoReplaceSys is renameatx_np(2) with RENAME_EXCL.
func renameNoReplaceSys(olddfd int, oldname string, newdfd int, newname string) error {
	return unix.RenameatxNp(olddfd, oldname, newdfd, newname, unix.RENAME_EXCL)
}

// exchangeSys is renameatx_np(2) with RENAME_SWAP.
func exchangeSys(dfd int, a, b string) error {
	return unix.RenameatxNp(dfd, a, dfd, b, unix.RENAME_SWAP)
}
