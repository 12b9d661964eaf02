package mirror

import "syscall"

// childAttr kills the source child when this process dies, so a crashed
// or killed benchmark leaves no broker behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
