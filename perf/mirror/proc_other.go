//go:build !linux

package mirror

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
