// Package procstat reads the CPU and memory counters of processes and of
// the machine from /proc and getrusage, for the perf programs and
// benchmarks that compare kmirror with other brokers run as processes
// (perf/mm2, perf/mirror, perf/produce). Outside Linux the /proc readers
// fail (there is no /proc); getrusage works on every Unix.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the tick counts in /proc/<pid>/stat and /proc/stat
// (USER_HZ, 100 on every Linux build Go supports).
const userHZ = 100

var ErrFormat = errors.New("procstat: unexpected /proc format")

// ParsePIDStat returns utime+stime of a /proc/<pid>/stat line: the CPU of
// every thread of the process (not of its waited-for children). Fields 14
// and 15 come after the parenthesised command name, which may itself hold
// spaces and parentheses, so the fields are counted from the last ')'.
func ParsePIDStat(data []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, ErrFormat
	}
	f := bytes.Fields(data[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, ErrFormat
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil || ut < 0 || st < 0 {
		return 0, ErrFormat
	}
	return ticks(ut + st), nil
}

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// ParseStatusKB reads a "Key:   N kB" line (VmHWM, VmRSS) of a
// /proc/<pid>/status file, in bytes.
func ParseStatusKB(data []byte, key string) (int64, error) {
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte(key+":"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("%w: %q", ErrFormat, line)
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("%w: %q", ErrFormat, line)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%w: no %s line", ErrFormat, key)
}

// MachineCPU is the first line of /proc/stat, all CPUs summed.
type MachineCPU struct {
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

// ParseMachineCPU parses the aggregate "cpu " line of /proc/stat.
func ParseMachineCPU(data []byte) (MachineCPU, error) {
	line, _, _ := bytes.Cut(data, []byte{'\n'})
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return MachineCPU{}, ErrFormat
	}
	var v [8]int64 // user nice system idle iowait irq softirq steal
	for i := range v {
		n, err := strconv.ParseInt(string(f[i+1]), 10, 64)
		if err != nil || n < 0 {
			return MachineCPU{}, ErrFormat
		}
		v[i] = n
	}
	return MachineCPU{
		Busy:  ticks(v[0] + v[1] + v[2] + v[5] + v[6]),
		IRQ:   ticks(v[5] + v[6]),
		Idle:  ticks(v[3] + v[4]),
		Steal: ticks(v[7]),
	}, nil
}

// ProcessCPU is a process's user+system CPU time from /proc/<pid>/stat;
// pid 0 is this process.
func ProcessCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(procPath(pid, "stat"))
	if err != nil {
		return 0, err
	}
	return ParsePIDStat(data)
}

// ProcessMem reads VmHWM (peak resident set since the process started) or
// VmRSS of a process, in bytes; pid 0 is this process.
func ProcessMem(pid int, key string) (int64, error) {
	data, err := os.ReadFile(procPath(pid, "status"))
	if err != nil {
		return 0, err
	}
	return ParseStatusKB(data, key)
}

// ReadMachineCPU reads /proc/stat.
func ReadMachineCPU() (MachineCPU, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, err
	}
	return ParseMachineCPU(data)
}

// SelfCPU is this process's CPU (all threads), from getrusage.
func SelfCPU() time.Duration { return rusage(syscall.RUSAGE_SELF) }

// ChildrenCPU is the CPU of this process's children that ended and were
// waited for (a kafka-consumer-perf-test JVM once it returned).
func ChildrenCPU() time.Duration { return rusage(syscall.RUSAGE_CHILDREN) }

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procPath is /proc/<pid>/<file>, /proc/self/<file> for pid 0.
func procPath(pid int, file string) string {
	if pid == 0 {
		return "/proc/self/" + file
	}
	return "/proc/" + strconv.Itoa(pid) + "/" + file
}

// CPUModel is the "model name" of /proc/cpuinfo, "unknown CPU" without one.
func CPUModel() string {
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range bytes.SplitSeq(data, []byte{'\n'}) {
			if k, v, ok := bytes.Cut(line, []byte{':'}); ok && string(bytes.TrimSpace(k)) == "model name" {
				return string(bytes.TrimSpace(v))
			}
		}
	}
	return "unknown CPU"
}

// LoadAverage is the three load averages of /proc/loadavg ("0.52 0.58
// 0.59"), "" when it cannot be read.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}
