//go:build unix && !linux

package worker

import "syscall"

// procAttr starts a worker in a process group of its own (killed as one).
// There is no parent-death signal here: a worker whose run died fails at
// its next record, as its records connection has ended, and its own
// deadline bounds the rest.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// socketPair is a pair of connected stream sockets, closed on exec. The
// socket and the flag are two calls here, so the fork lock keeps a
// concurrent exec from inheriting them in between.
func socketPair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	return fds, err
}
