package testutil

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

// Tmpfs mounts a tmpfs of size bytes on a new directory and unmounts it when
// the test ends: a small real filesystem that fills up, for full-disk tests.
// Mounting needs root; elsewhere the test is skipped, except under CI
// (CI set), where a skip would hide a test that never runs.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("mounting a tmpfs needs root, and CI is set: run the tests as root")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	dir, err := os.MkdirTemp("", "kmirror-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		os.Remove(dir)
		t.Fatalf("mounting a %d-byte tmpfs on %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

// FillDisk writes a file in dir until the filesystem has at most leave bytes
// free (0: until ENOSPC) and returns its path; removing it frees the space.
func FillDisk(t testing.TB, dir string, leave int64) string {
	t.Helper()
	path := dir + "/filler"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		free := int64(st.Bfree) * int64(st.Bsize)
		if free <= leave {
			return path
		}
		n := min(int64(len(chunk)), free-leave)
		if _, err := f.Write(chunk[:n]); err != nil {
			if leave == 0 && errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatalf("filling %s: %v", dir, err)
		}
	}
}
