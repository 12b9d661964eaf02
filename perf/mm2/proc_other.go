//go:build !linux

package main

import "syscall"

// childAttr puts a child in its own process group. Outside Linux there is
// no parent-death signal and no /proc: the CPU and memory columns come out
// unknown.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
