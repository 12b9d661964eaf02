package main

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParsePIDStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want time.Duration
		ok   bool
	}{
		{"java", "4242 (java) S 1 4242 4242 0 -1 4194560 118279 0 1 0 2510 389 0 0 20 0 91 0 5386 4523491328 131072 " +
			"18446744073709551615 1 1 0 0 0 0 0 2 16800972 0 0 0 17 1 0 0 0 0 0\n", 28990 * time.Millisecond, true},
		// The command name may hold spaces and parentheses: fields count
		// from the last ')'.
		{"odd comm", "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 100 50 0 0 20 0 1 0 0 0 0\n", 1500 * time.Millisecond, true},
		{"no paren", "7 a R 1 7 7 0 -1 0 0 0 0 0 100 50\n", 0, false},
		{"truncated", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 100\n", 0, false},
		{"not a number", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 x 50 0\n", 0, false},
		{"negative", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 -5 50 0\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parsePIDStat([]byte(tt.in))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("parsePIDStat = %v, %v; want %v, ok %v", got, err, tt.want, tt.ok)
			}
			if err != nil && !errors.Is(err, errProcFormat) {
				t.Fatalf("error %v is not errProcFormat", err)
			}
		})
	}
}

func TestParseStatusKB(t *testing.T) {
	t.Parallel()
	status := "Name:\tjava\nVmPeak:\t 5000000 kB\nVmHWM:\t 2165760 kB\nVmRSS:\t  1048576 kB\nThreads:\t91\nBad:\t12 MB\n"
	tests := []struct {
		key  string
		want int64
		ok   bool
	}{
		{"VmHWM", 2165760 << 10, true},
		{"VmRSS", 1 << 30, true},
		{"VmSwap", 0, false},
		{"Bad", 0, false},     // not kB
		{"Threads", 0, false}, // no unit
		{"Vm", 0, false},      // a prefix of several keys is no key
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			got, err := parseStatusKB([]byte(status), tt.key)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("parseStatusKB(%s) = %d, %v; want %d, ok %v", tt.key, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestParseMachineCPU(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want machineCPU
		ok   bool
	}{
		{"kernel 6", "cpu  1000 10 200 5000 40 3 7 30 0 0\ncpu0 500 5 100 2500 20 1 3 15 0 0\n",
			machineCPU{Busy: 12200 * time.Millisecond, IRQ: 100 * time.Millisecond, Idle: 50400 * time.Millisecond, Steal: 300 * time.Millisecond}, true},
		{"old kernel, 8 fields", "cpu 1 2 3 4 5 6 7 8\n", machineCPU{Busy: 190 * time.Millisecond, IRQ: 130 * time.Millisecond, Idle: 90 * time.Millisecond, Steal: 80 * time.Millisecond}, true},
		{"short", "cpu 1 2 3\n", machineCPU{}, false},
		{"per-cpu line first", "cpu0 1 2 3 4 5 6 7 8\n", machineCPU{}, false},
		{"garbage", "cpu a b c d e f g h\n", machineCPU{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseMachineCPU([]byte(tt.in))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("parseMachineCPU = %+v, %v; want %+v, ok %v", got, err, tt.want, tt.ok)
			}
		})
	}
}

// The readers work on this process's own /proc files.
func TestProcSelf(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("no /proc")
	}
	if _, err := processCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	hwm, err := processMem(os.Getpid(), "VmHWM")
	if err != nil || hwm <= 0 {
		t.Fatalf("VmHWM = %d, %v", hwm, err)
	}
	if _, err := readMachineCPU(); err != nil {
		t.Fatal(err)
	}
}

func TestSpanOf(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	a := snapshot{at: t0, copier: 0, dest: 10 * time.Second, source: 5 * time.Second, self: time.Second, waited: time.Second,
		machine: machineCPU{Busy: 100 * time.Second, IRQ: 2 * time.Second, Steal: time.Second}, ok: true}
	b := snapshot{at: t0.Add(10 * time.Second), copier: 8 * time.Second, dest: 13 * time.Second, source: 6 * time.Second,
		self: 1500 * time.Millisecond, waited: 2 * time.Second, machine: machineCPU{Busy: 115 * time.Second, IRQ: 2500 * time.Millisecond, Steal: 3 * time.Second}, ok: true}
	s := spanOf(a, b)
	want := span{Wall: 10 * time.Second, Copier: 8 * time.Second, Dest: 3 * time.Second, Source: time.Second,
		Self: 500 * time.Millisecond, Waited: time.Second, Other: 1000 * time.Millisecond, IRQ: 500 * time.Millisecond, Steal: 2 * time.Second}
	if s != want {
		t.Fatalf("spanOf = %+v, want %+v", s, want)
	}
	// A failed read makes that column and Other unknown, not wrong.
	b.dest = -1
	s = spanOf(a, b)
	if s.Dest != -1 || s.Other != -1 || s.Copier != 8*time.Second {
		t.Fatalf("with an unknown dest: %+v", s)
	}
	if got := perGB(s.Dest, 1e9); got != -1 {
		t.Fatalf("perGB of unknown CPU = %v, want -1", got)
	}
	if got := perGB(3*time.Second, 2e9); got != 1.5 {
		t.Fatalf("perGB(3s, 2 GB) = %v, want 1.5", got)
	}
}
