package benchcluster

import "syscall"

// childAttr kills a target child when this process dies, so an
// interrupted run leaves no broker behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
