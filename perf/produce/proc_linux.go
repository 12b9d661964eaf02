package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// userHZ is the unit of the tick counts in /proc/<pid>/stat and /proc/stat
// (USER_HZ, 100 on every Linux build Go supports).
const userHZ = 100

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
	var s procSnap
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := bytes.Cut(data, []byte{'\n'})
		f := bytes.Fields(line)
		// cpu user nice system idle iowait irq softirq ...
		field := func(i int) time.Duration {
			if i >= len(f) {
				return 0
			}
			n, _ := strconv.ParseInt(string(f[i]), 10, 64)
			return ticks(n)
		}
		s.busy = field(1) + field(2) + field(3)
		s.irq = field(6) + field(7)
	}
	if pid > 0 {
		s.target, s.ok = pidCPU(pid)
	}
	for _, p := range idle {
		d, _ := pidCPU(p)
		s.idle += d
	}
	return s
}

// pidCPU is utime+stime of every thread of process pid, fields 14 and 15
// of /proc/<pid>/stat, counted after the parenthesised command name (which
// may hold spaces).
func pidCPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return ticks(ut + st), true
}

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// childAttr kills a target child when this process dies, so an
// interrupted run leaves no broker behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
