package pagecache

import (
	"os"
	"testing"
)

// WarmFreePages leaves nothing behind, and says so when it cannot write.
func TestWarmFreePagesLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	if err := WarmFreePages(3<<20 + 5); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	t.Setenv("TMPDIR", dir+"/missing")
	if err := WarmFreePages(1); err == nil {
		t.Fatal("no error without a temporary directory")
	}
}
