package mirror

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux build Go supports).
const userHZ = 100

// processCPU is this process's user+system CPU time (all threads).
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// selfRSS is this process's resident set (VmRSS), in bytes.
func selfRSS() (int64, bool) { return procStatusKB("/proc/self/status", "VmRSS:") }

// procStatusKB reads a "Name:   N kB" line of a /proc status file.
func procStatusKB(path, key string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return 0, false
	}
	line := data[i+len(key):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := bytes.Fields(line)
	if len(f) == 0 {
		return 0, false
	}
	kb, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0, false
	}
	return kb << 10, true
}

// childCPU is a child process's user+system CPU time, all threads, from
// /proc/<pid>/stat (fields 14 and 15, after the parenthesised command
// name, which may itself hold spaces).
func childCPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(data[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / userHZ, true
}

// childRSS is a child process's VmRSS in bytes.
func childRSS(pid int) (int64, bool) {
	return procStatusKB("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS:")
}

// childAttr kills the source child when this process dies, so a crashed
// or killed benchmark leaves no broker behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
