package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/node"
	"github.com/kmirror/kmirror/state"
)

// `storage format` gives new dirs the operator's cluster id, which the node
// started on them keeps; dirs already formatted, of another cluster, or
// holding partitions are refused with nothing written.
func TestStorageFormat(t *testing.T) {
	t.Parallel()
	code, out, _ := storageCLI("random-uuid")
	id := strings.TrimSpace(out)
	if code != 0 || len(id) != 22 {
		t.Fatalf("random-uuid: exit %d, %q", code, out)
	}
	if _, again, _ := storageCLI("random-uuid"); strings.TrimSpace(again) == id {
		t.Fatal("random-uuid printed the same id twice")
	}
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	dirs := []string{"--log-dirs", dirA + "," + dirB}
	format := func(args ...string) (int, string, string) {
		return storageCLI(append(append([]string{"format"}, dirs...), args...)...)
	}
	if code, _, errOut := format(); code != 2 || !strings.Contains(errOut, "--cluster-id is required") {
		t.Fatalf("no --cluster-id: exit %d, %s", code, errOut)
	}
	if code, _, errOut := format("--cluster-id", "not-an-id"); code != 1 || !strings.Contains(errOut, "not a Kafka cluster id") {
		t.Fatalf("a bad id: exit %d, %s", code, errOut)
	}
	code, out, errOut := format("--cluster-id", id)
	if code != 0 || strings.Count(out, "formatted ") != 3 {
		t.Fatalf("format: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := format("--cluster-id", id); code != 1 || !strings.Contains(errOut, "already formatted") {
		t.Fatalf("formatting again: exit %d, %s", code, errOut)
	}
	if code, out, _ := format("--cluster-id", id, "--ignore-formatted"); code != 0 || strings.Count(out, "already has cluster id") != 3 {
		t.Fatalf("--ignore-formatted: exit %d, %s", code, out)
	}
	_, otherOut, _ := storageCLI("random-uuid")
	other := strings.TrimSpace(otherOut)
	if code, _, errOut := format("--cluster-id", other, "--ignore-formatted"); code != 1 || !strings.Contains(errOut, "belongs to cluster "+id) {
		t.Fatalf("another cluster's id: exit %d, %s", code, errOut)
	}

	cfg := nodetest.Config(t)
	cfg.LogDirs = []string{dirA, dirB}
	// The format runs in this process: CI saw the node's start find the
	// state store still locked after the format's Close, once in many
	// runs. A lock that is released a moment later is waited for (and
	// logged); one never released fails the test.
	var n *node.Node
	testutil.CheckFor(t, 10*time.Second, func() error {
		var err error
		if n, err = node.Start(cfg, control.Config{}); errors.Is(err, state.ErrLocked) {
			t.Logf("starting the node on the formatted dirs: %v (retried)", err)
		} else if err != nil {
			t.Fatal(err)
		}
		return err
	})
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("closing the node: %v", err)
		}
	})
	if n.Broker.ClusterID() != id {
		t.Fatalf("the node started on formatted dirs has cluster id %s, want %s", n.Broker.ClusterID(), id)
	}

	// A log dir holding partitions but no meta.properties is not new:
	// refused before anything is written.
	used := t.TempDir()
	if err := os.Mkdir(filepath.Join(used, "orders-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	code, _, errOut = storageCLI("format", "--cluster-id", id, "--log-dirs", fresh+","+used)
	if code != 1 || !strings.Contains(errOut, "holds partition directories") {
		t.Fatalf("a used log dir: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("a refused format wrote %s (%v)", fresh, err)
	}
}
