package ssh

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pkg/sftp"

	"github.com/handoff-sync/handoff/transport"
)

var _ transport.Writer = (*FS)(nil)

// WriteNew creates name with SSH_FXF_CREAT|SSH_FXF_EXCL, which fails on
// any existing name, a symlink included, and never follows one. It
// writes data, asks for fsync@openssh.com where the server offers it,
// sets the mode with FSETSTAT and returns the handle's FSTAT. The handle
// is closed before WriteNew returns, so that a rename that follows sees
// the whole file. A write that fails removes what it created.
func (f *FS) WriteNew(ctx context.Context, name string, data []byte, perm fs.FileMode) (transport.FileInfo, bool, error) {
	var fi transport.FileInfo
	synced := false
	f.readRegular.forget(name)
	err := f.call(ctx, func() error {
		if err := f.handles.acquire(context.Background(), f.done); err != nil {
			return err
		}
		file, err := f.sftp.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		if err != nil {
			f.handles.release()
			if _, lerr := f.sftp.Lstat(name); lerr == nil {
				return fmt.Errorf("%w (%v)", transport.ErrExist, err)
			}
			return err
		}
		err = writeAll(file, data)
		if err == nil {
			switch serr := file.Sync(); {
			case serr == nil:
				synced = true
			case !unsupported(serr):
				err = fmt.Errorf("fsync: %w", serr)
			}
		}
		if err == nil {
			err = file.Chmod(perm)
		}
		var st os.FileInfo
		if err == nil {
			st, err = file.Stat()
		}
		f.closeNow(file)
		if err != nil {
			if rerr := f.sftp.Remove(name); rerr != nil {
				f.log.Debug("sftp: remove after a failed write", "host", f.cfg.Alias, "file", name, "err", rerr)
			}
			return err
		}
		fi = fromOS(st)
		return nil
	})
	return fi, synced, opErr("write", name, err)
}

// writeAll writes data from offset 0 in 32 KiB requests.
func writeAll(file *sftp.File, data []byte) error {
	for off := 0; off < len(data); {
		n, err := file.WriteAt(data[off:min(len(data), off+readChunk)], int64(off))
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

// Replace uses posix-rename@openssh.com, which is rename(2) on the server
// and replaces newname atomically. Servers without it give
// transport.ErrUnsupported: their SSH_FXP_RENAME refuses an existing
// newname (OpenSSH's, Green End's) or is not promised to be atomic.
func (f *FS) Replace(ctx context.Context, oldname, newname string) error {
	if _, ok := f.sftp.HasExtension("posix-rename@openssh.com"); !ok {
		return transport.ErrUnsupported
	}
	f.readRegular.forget(oldname)
	f.readRegular.forget(newname)
	err := f.call(ctx, func() error { return f.sftp.PosixRename(oldname, newname) })
	if err != nil {
		return &capped{msg: clipText(fmt.Sprintf("sftp: rename %q over %q: %v", oldname, newname, err), maxErrText), err: err}
	}
	return nil
}

// unsupported reports whether err is SSH_FX_OP_UNSUPPORTED.
func unsupported(err error) bool {
	var se *sftp.StatusError
	return errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxOpUnsupported
}
