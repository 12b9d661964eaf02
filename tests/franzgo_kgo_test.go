package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// franz-go's own integration tests, run against kmirror as against a
// Kafka broker (KGO_SEEDS): the module at the version go.mod requires is
// copied out of the module cache (read-only there) and tested.
//
// franzGoTestRecords is KGO_TEST_RECORDS (franz-go's default: 500,000).
const franzGoTestRecords = 20000

// TestConsumeRegex found kmirror lacking __consumer_offsets ("topic
// __consumer_offsets is not in metadata", issue 23): it asks for a group
// coordinator and waits for the topic, marked internal, in Metadata.
//
// TestGroupETL and TestTxnEtl chain consumer groups through three topics,
// the second with transactional producers committing the group's offsets
// in their transactions (exactly-once), checking every record arrives
// once in order; franzGoTestRecords bounds their size.
//
// TestShareGroupETL, TestShareGroupAckOnClose and TestShareGroupOffsetsAdmin
// are franz-go's share consumer (KIP-932) through chained share groups
// with every acknowledgement strategy (accept, release, reject, on close)
// and its share offsets admin calls; the node serves share groups.
func TestFranzGoKgoAgainstKmirror(t *testing.T) {
	t.Parallel()
	n := startNode(t, noRebalanceDelay, shareGroupsOn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/twmb/franz-go").Output()
	if err != nil {
		t.Fatalf("finding the franz-go module: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "franz-go")
	if err := os.CopyFS(dir, os.DirFS(strings.TrimSpace(string(out)))); err != nil {
		t.Fatalf("copying the franz-go module: %v", err)
	}
	for _, test := range []string{"TestConsumeRegex", "TestGroupETL", "TestTxnEtl",
		"TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin"} {
		cmd := exec.CommandContext(ctx, "go", "test", "-v", "-count=1", "-run", "^"+test+"$", "./pkg/kgo")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KGO_SEEDS="+n.addr(), "KGO_TEST_RF=1",
			"KGO_TEST_RECORDS="+strconv.Itoa(franzGoTestRecords))
		// franz-go skips what a broker does not offer: a pass is
		// required, not a clean exit.
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: "+test+" ") {
			t.Errorf("franz-go's %s against kmirror: %v, want --- PASS:\n%s", test, err, out)
		}
	}
}
