package main

import (
	"time"

	"github.com/kmirror/kmirror/internal/procstat"
)

// procSnap is the CPU counters at one instant.
type procSnap struct {
	target time.Duration // the target process's utime+stime
	self   time.Duration // this process's, from getrusage
	idle   time.Duration // the idle targets' utime+stime
	busy   time.Duration // the machine's user+nice+system
	irq    time.Duration // the machine's irq+softirq: no process is charged (loopback TCP's receive side)
	ok     bool          // target read (pid > 0 and /proc readable)
}

// snapshot reads the counters; pid 0 (a target in this process) leaves
// target unread. The CPU of idle, the other targets, is read into idle.
func snapshot(pid int, idle ...int) procSnap {
	s := procSnap{self: procstat.SelfCPU()}
	if m, err := procstat.ReadMachineCPU(); err == nil {
		s.busy, s.irq = m.Busy-m.IRQ, m.IRQ
	}
	if pid > 0 {
		d, err := procstat.ProcessCPU(pid)
		s.target, s.ok = d, err == nil
	}
	for _, p := range idle {
		if d, err := procstat.ProcessCPU(p); err == nil {
			s.idle += d
		}
	}
	return s
}
