//go:build !linux

package benchcluster

import "syscall"

// childAttr puts a target child in its own process group.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
