package testutil

import (
	"log/slog"
	"testing"
)

// LogOnFailure is a logger (debug level) whose records the test prints
// only when it fails: the story of a rare failure (a group's rebalances, a
// coordinator's loads) without the noise of every passing run.
func LogOnFailure(t testing.TB) *slog.Logger {
	t.Helper()
	var buf SyncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the node's log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
