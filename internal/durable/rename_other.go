//go:build unix && !linux && !darwin

package durable

import "golang.org/x/sys/unix"

// renameNoReplace has no system call here; RenameNoReplace links and
// unlinks instead.
func renameNoReplace(olddfd int, oldname string, newdfd int, newname string) error {
	return unix.ENOSYS
}

// exchange has no system call here; Swap checks, then renames.
func exchange(dfd int, a, b string) error {
	return unix.ENOSYS
}
