//go:build !linux

package mirror

import (
	"syscall"
	"time"
)

// Outside Linux there is no /proc: CPU and memory are reported as unknown.

func processCPU() (time.Duration, bool)  { return 0, false }
func selfRSS() (int64, bool)             { return 0, false }
func childCPU(int) (time.Duration, bool) { return 0, false }
func childRSS(int) (int64, bool)         { return 0, false }
func childAttr() *syscall.SysProcAttr    { return nil }
