package durable

import "golang.org/x/sys/unix"

// renameNoReplaceSys is renameat2(2) with RENAME_NOREPLACE.
func renameNoReplaceSys(olddfd int, oldname string, newdfd int, newname string) error {
	return unix.Renameat2(olddfd, oldname, newdfd, newname, unix.RENAME_NOREPLACE)
}

// exchangeSys is renameat2(2) with RENAME_EXCHANGE.
func exchangeSys(dfd int, a, b string) error {
	return unix.Renameat2(dfd, a, dfd, b, unix.RENAME_EXCHANGE)
}
