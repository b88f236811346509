package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Narrow takes the group's and others' permissions away from an open file
// or directory that this process's user owns, so that what an earlier
// version or a wide umask left readable becomes private. It never adds a
// permission. A file another user owns is left as it is, and so is one on
// a file system that refuses modes (vfat, a read-only mount): there the
// mode was never the file's protection.
func Narrow(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("durable: narrow %s: %w", f.Name(), err)
	}
	mode := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	if mode&0o077 == 0 {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return nil
	}
	err = f.Chmod(mode &^ 0o077)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("durable: narrow %s: %w", f.Name(), err)
	}
	return nil
}
