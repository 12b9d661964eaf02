package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// userHZ is the unit of the tick counts in /proc/<pid>/stat and /proc/stat
// (USER_HZ, 100 on every Linux build Go supports).
const userHZ = 100

var errProcFormat = errors.New("mm2 bench: unexpected /proc format")

// parsePIDStat returns utime+stime of a /proc/<pid>/stat line: the CPU of
// every thread of the process (not of its waited-for children). Fields 14
// and 15 come after the parenthesised command name, which may itself hold
// spaces and parentheses, so the fields are counted from the last ')'.
func parsePIDStat(data []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errProcFormat
	}
	f := bytes.Fields(data[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, errProcFormat
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil || ut < 0 || st < 0 {
		return 0, errProcFormat
	}
	return ticks(ut + st), nil
}

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// parseStatusKB reads a "Key:   N kB" line (VmHWM, VmRSS) of a
// /proc/<pid>/status file, in bytes.
func parseStatusKB(data []byte, key string) (int64, error) {
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte(key+":"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("%w: %q", errProcFormat, line)
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("%w: %q", errProcFormat, line)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%w: no %s line", errProcFormat, key)
}

// machineCPU is the first line of /proc/stat, all CPUs summed.
type machineCPU struct {
	// Busy is user+nice+system+irq+softirq: work this guest's CPUs did
	// (guest time is inside user).
	Busy time.Duration
	// IRQ is irq+softirq, inside Busy: the kernel's interrupt work, which
	// no process is charged with (on loopback, much of TCP's receive
	// path).
	IRQ time.Duration
	// Idle is idle+iowait.
	Idle time.Duration
	// Steal is time the hypervisor ran something else while this guest
	// wanted a CPU: a direct measure of a noisy host.
	Steal time.Duration
}

// parseMachineCPU parses the aggregate "cpu " line of /proc/stat.
func parseMachineCPU(data []byte) (machineCPU, error) {
	line, _, _ := bytes.Cut(data, []byte{'\n'})
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return machineCPU{}, errProcFormat
	}
	var v [8]int64 // user nice system idle iowait irq softirq steal
	for i := range v {
		n, err := strconv.ParseInt(string(f[i+1]), 10, 64)
		if err != nil || n < 0 {
			return machineCPU{}, errProcFormat
		}
		v[i] = n
	}
	return machineCPU{
		Busy:  ticks(v[0] + v[1] + v[2] + v[5] + v[6]),
		IRQ:   ticks(v[5] + v[6]),
		Idle:  ticks(v[3] + v[4]),
		Steal: ticks(v[7]),
	}, nil
}

// processCPU is a process's user+system CPU time from /proc/<pid>/stat.
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parsePIDStat(data)
}

// processMem reads VmHWM (peak resident set since the process started) or
// VmRSS of a process, in bytes.
func processMem(pid int, key string) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseStatusKB(data, key)
}

// readMachineCPU reads /proc/stat.
func readMachineCPU() (machineCPU, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}, err
	}
	return parseMachineCPU(data)
}

// selfCPU is this process's CPU (the runner's own polling), from getrusage.
func selfCPU() time.Duration { return rusage(syscall.RUSAGE_SELF) }

// childrenCPU is the CPU of this process's children that ended and were
// waited for (a kafka-consumer-perf-test JVM once it returned).
func childrenCPU() time.Duration { return rusage(syscall.RUSAGE_CHILDREN) }

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
