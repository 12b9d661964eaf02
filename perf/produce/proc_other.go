//go:build !linux

package main

import (
	"syscall"
	"time"
)

// procSnap is the CPU counters at one instant; outside Linux there is no
// /proc, so only this process's own CPU is known.
type procSnap struct {
	target, self, idle, busy, irq time.Duration
	ok                            bool
}

func snapshot(int, ...int) procSnap { return procSnap{} }

// childAttr puts a target child in its own process group.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
