package procstat

import (
	"errors"
	"os"
	"runtime"
	"strings"
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
			got, err := ParsePIDStat([]byte(tt.in))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParsePIDStat = %v, %v; want %v, ok %v", got, err, tt.want, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
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
			got, err := ParseStatusKB([]byte(status), tt.key)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseStatusKB(%s) = %d, %v; want %d, ok %v", tt.key, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestParseMachineCPU(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want MachineCPU
		ok   bool
	}{
		{"kernel 6", "cpu  1000 10 200 5000 40 3 7 30 0 0\ncpu0 500 5 100 2500 20 1 3 15 0 0\n",
			MachineCPU{Busy: 12200 * time.Millisecond, IRQ: 100 * time.Millisecond, Idle: 50400 * time.Millisecond, Steal: 300 * time.Millisecond}, true},
		{"old kernel, 8 fields", "cpu 1 2 3 4 5 6 7 8\n", MachineCPU{Busy: 190 * time.Millisecond, IRQ: 130 * time.Millisecond, Idle: 90 * time.Millisecond, Steal: 80 * time.Millisecond}, true},
		{"short", "cpu 1 2 3\n", MachineCPU{}, false},
		{"per-cpu line first", "cpu0 1 2 3 4 5 6 7 8\n", MachineCPU{}, false},
		{"garbage", "cpu a b c d e f g h\n", MachineCPU{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseMachineCPU([]byte(tt.in))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseMachineCPU = %+v, %v; want %+v, ok %v", got, err, tt.want, tt.ok)
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
	if _, err := ProcessCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	hwm, err := ProcessMem(os.Getpid(), "VmHWM")
	if err != nil || hwm <= 0 {
		t.Fatalf("VmHWM = %d, %v", hwm, err)
	}
	if _, err := ReadMachineCPU(); err != nil {
		t.Fatal(err)
	}
	if l := LoadAverage(); len(strings.Fields(l)) != 3 {
		t.Fatalf("LoadAverage = %q, want three numbers", l)
	}
	if CPUModel() == "" {
		t.Fatal("CPUModel is empty")
	}
}
