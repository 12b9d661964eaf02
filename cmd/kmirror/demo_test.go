package main

import (
	"strings"
	"testing"
)

// The demo runs the product's main job end to end: mirror, byte-for-byte
// check, failover, produce (idempotent, then an aborted and a committed
// transaction through the new primary's coordinator, read back
// read_committed), failback, check again. It fails if any step does.
func TestDemo(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := run([]string{"demo", "--records", "5000"}, &out, &errOut); code != 0 {
		t.Fatalf("demo exited %d:\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{
		"B caught up; offsets and bytes identical",
		"failover: stop mirroring on B (writable)",
		"transactions on B: abort 30 records, commit 30",
		"failback: A mirrored B's delta; identical",
		"demo done in",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	// The read_committed consumers, on the new primary and on A after it
	// mirrored B's transactions back, see the committed records only.
	for _, step := range []string{"read_committed on B: committed records only", "read_committed on A (mirrored): committed only"} {
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			found = found || strings.HasPrefix(line, step) && strings.Contains(line, "30 committed, 0 aborted (60 in the log)")
		}
		if !found {
			t.Errorf("demo output lacks %q with 30 committed, 0 aborted (60 in the log):\n%s", step, out.String())
		}
	}
}

// The cluster demo (make demo-cluster): a mirror into three nodes, one
// stopped mid-mirroring, the copy byte for byte, a failover with it down,
// a consumer group resumed on the cluster, transactions on it after.
func TestDemoCluster(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := run([]string{"demo", "--cluster", "--records", "4000"}, &out, &errOut); code != 0 {
		t.Fatalf("demo --cluster exited %d:\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{
		"mirror dr: each partition's fetcher on its leader",
		"the new leaders mirrored on; bytes identical to S",
		"every partition STOPPED",
		"group demo-consumers resumes on the cluster",
		"transactions on the cluster: abort 30 records, commit 30",
		"read_committed on the cluster: committed records only",
		"from offset sum 2000, nothing read twice",
		"demo done in",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo --cluster output lacks %q:\n%s", want, out.String())
		}
	}
}
