package main

import (
	"time"

	"github.com/kmirror/kmirror/internal/procstat"
)

// procSnap is the CPU counters at one instant: the machine's busy time
// (user+nice+system: no process is charged with irq and softirq), this
// process's and the nodes'.
type procSnap struct {
	busy, self, nodes time.Duration
	ok                bool
}

func snapshot(pids []int) procSnap {
	s := procSnap{self: procstat.SelfCPU()}
	m, err := procstat.ReadMachineCPU()
	s.busy, s.ok = m.Busy-m.IRQ, err == nil
	for _, p := range pids {
		if d, err := procstat.ProcessCPU(p); err == nil {
			s.nodes += d
		}
	}
	return s
}

// othersSince is the CPU that processes other than this one and the
// nodes used since a: someone else's build, the CI run.
func (s procSnap) othersSince(a procSnap) time.Duration {
	if !s.ok || !a.ok {
		return 0
	}
	return max(0, (s.busy-a.busy)-(s.self-a.self)-(s.nodes-a.nodes))
}

// allPIDs are the running nodes of every cluster.
func allPIDs(cs []cluster) []int {
	var out []int
	for _, c := range cs {
		out = append(out, c.PIDs()...)
	}
	return out
}
