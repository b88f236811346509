//go:build unix && !linux && !darwin

package durable

import "golang.org/x/sys/unix"

// renameNoReplaceSys has no system call here; RenameNoReplace links and
// unlinks instead.
func renameNoReplaceSys(olddfd int, oldname string, newdfd int, newname string) error {
	return unix.ENOSYS
}

// exchangeSys has no system call here; Swap checks, then renames.
func exchangeSys(dfd int, a, b string) error {
	return unix.ENOSYS
}
