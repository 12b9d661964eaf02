package main

import (
	"strings"
	"testing"
)

// The demo runs the product's main job end to end: mirror, byte-for-byte
// check, failover, produce, failback, check again. It fails if any step
// does.
func TestDemo(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := run([]string{"demo", "--records", "5000"}, &out, &errOut); code != 0 {
		t.Fatalf("demo exited %d:\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{
		"B caught up; offsets and bytes identical",
		"failover: stop mirroring on B (writable)",
		"failback: A mirrored B's delta; identical",
		"demo done in",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
