package main

import (
	"time"

	"github.com/kmirror/kmirror/internal/procstat"
)

// cpuSnap is the CPU counters at one instant: the machine's busy time
// without irq and softirq (no process is charged with them), this
// process's, the measured system's nodes' and every node's.
type cpuSnap struct {
	busy, self, nodes, all time.Duration
	ok                     bool
}

// cpuUse is what a cell's blocks cost: the measured nodes' CPU, and what
// processes other than this one and the nodes of both systems took.
type cpuUse struct {
	nodes, others time.Duration
}

// snapshot reads the counters; nodes are the measured system's pids, all
// every system's (nil in-process: the nodes' CPU is then this process's).
func snapshot(nodes []int, all func() []int) cpuSnap {
	s := cpuSnap{self: procstat.SelfCPU()}
	m, err := procstat.ReadMachineCPU()
	s.busy, s.ok = m.Busy-m.IRQ, err == nil
	sum := func(pids []int) time.Duration {
		var d time.Duration
		for _, p := range pids {
			if c, err := procstat.ProcessCPU(p); err == nil {
				d += c
			}
		}
		return d
	}
	s.nodes = sum(nodes)
	if all != nil {
		s.all = sum(all())
	}
	return s
}

// since is the use between a and s. A node restarted in between would
// make a delta negative; none is restarted here, but clamp anyway.
func (s cpuSnap) since(a cpuSnap) cpuUse {
	u := cpuUse{nodes: max(0, s.nodes-a.nodes)}
	if s.ok && a.ok {
		u.others = max(0, (s.busy-a.busy)-(s.self-a.self)-(s.all-a.all))
	}
	return u
}
