package testutil

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// cleanupTB runs its cleanups when told, fails when told, and keeps what
// it logs.
type cleanupTB struct {
	testing.TB
	cleanups []func()
	failed   bool
	logged   strings.Builder
}

func (c *cleanupTB) Helper()                      {}
func (c *cleanupTB) Cleanup(f func())             { c.cleanups = append(c.cleanups, f) }
func (c *cleanupTB) Failed() bool                 { return c.failed }
func (c *cleanupTB) Logf(format string, a ...any) { fmt.Fprintf(&c.logged, format, a...) }

func (c *cleanupTB) end() {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
}

func TestLogOnFailure(t *testing.T) {
	t.Parallel()
	for _, failed := range []bool{false, true} {
		tb := &cleanupTB{failed: failed}
		LogOnFailure(tb, slog.LevelDebug).Debug("group rebalanced", "generation", 7)
		tb.end()
		got := tb.logged.String()
		if shown := strings.Contains(got, "group rebalanced") && strings.Contains(got, "generation=7"); shown != failed {
			t.Errorf("test failed %v: log printed %q, want it printed only on failure", failed, got)
		}
	}
}
