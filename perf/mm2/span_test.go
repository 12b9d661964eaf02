package main

import (
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/procstat"
)

func TestSpanOf(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	a := snapshot{at: t0, copier: 0, dest: 10 * time.Second, source: 5 * time.Second, self: time.Second, waited: time.Second,
		machine: procstat.MachineCPU{Busy: 100 * time.Second, IRQ: 2 * time.Second, Steal: time.Second}, ok: true}
	b := snapshot{at: t0.Add(10 * time.Second), copier: 8 * time.Second, dest: 13 * time.Second, source: 6 * time.Second,
		self: 1500 * time.Millisecond, waited: 2 * time.Second, machine: procstat.MachineCPU{Busy: 115 * time.Second, IRQ: 2500 * time.Millisecond, Steal: 3 * time.Second}, ok: true}
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
