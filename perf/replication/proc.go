package main

import (
	"time"

	"github.com/kmirror/kmirror/internal/procstat"
)

// procSnap is the CPU counters at one instant: the machine's busy time
// (user+nice+system: no process is charged with irq and softirq), this
// process's and its waited-for children's (the tool JVMs once they
// exited), the measured system's nodes' and the other system's.
type procSnap struct {
	busy, self, nodes, idle time.Duration
	ok                      bool
}

func snapshot(own, idle []int) procSnap {
	s := procSnap{self: procstat.SelfCPU() + procstat.ChildrenCPU()}
	m, err := procstat.ReadMachineCPU()
	s.busy, s.ok = m.Busy-m.IRQ, err == nil
	for _, p := range own {
		if d, err := procstat.ProcessCPU(p); err == nil {
			s.nodes += d
		}
	}
	for _, p := range idle {
		if d, err := procstat.ProcessCPU(p); err == nil {
			s.idle += d
		}
	}
	return s
}

// cpuSpan is the CPU between two snapshots: the measured nodes', the
// tool's (with this process), and the rest of the machine's.
type cpuSpan struct{ nodes, tool, others time.Duration }

func (s procSnap) since(a procSnap) cpuSpan {
	c := cpuSpan{nodes: s.nodes - a.nodes, tool: s.self - a.self}
	if s.ok && a.ok {
		c.others = max(0, (s.busy-a.busy)-c.tool-c.nodes-(s.idle-a.idle))
	}
	return c
}
