package main

import "syscall"

// childAttr puts a child in its own process group (so a stop reaches the
// JVM's whole group) and kills it when this process dies, so a crashed or
// interrupted run leaves no MirrorMaker or kmirror behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
