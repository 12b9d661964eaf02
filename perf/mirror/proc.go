package mirror

import (
	"time"

	"github.com/kmirror/kmirror/internal/procstat"
)

// procCPU is a process's user+system CPU time (pid 0: this one), false
// where it cannot be read (no /proc).
func procCPU(pid int) (time.Duration, bool) {
	if pid == 0 {
		return procstat.SelfCPU(), true
	}
	d, err := procstat.ProcessCPU(pid)
	return d, err == nil
}

// procRSS is a process's resident set in bytes (pid 0: this one).
func procRSS(pid int) (int64, bool) {
	n, err := procstat.ProcessMem(pid, "VmRSS")
	return n, err == nil
}
