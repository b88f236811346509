package worker

import "syscall"

// procAttr starts a worker in a process group of its own (killed as one)
// with SIGKILL as its parent-death signal.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// socketPair is a pair of connected stream sockets, closed on exec.
func socketPair() ([2]int, error) {
	return syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
}
