package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := WriteFileAtomic(Default, dir, name, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(Default, dir, name, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(Default, name); err != nil || string(b) != "two" {
		t.Fatalf("read %q %v", b, err)
	}
	// A failing write keeps the old content and leaves no temporary file.
	ffs := NewFaultFS(Default)
	ffs.DiskFull(1)
	if err := WriteFileAtomic(ffs, dir, name, []byte("three")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("full disk: %v", err)
	}
	if b, _ := ReadFile(Default, name); string(b) != "two" {
		t.Fatalf("content after failed write %q", b)
	}
	if _, err := os.Stat(name + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
}

// ReplaceFile replaces as WriteFileAtomic does, without an fsync.
func TestReplaceFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	ffs := NewFaultFS(Default)
	ffs.Fail(OpSync, ErrInjected)
	for _, content := range []string{"one", "two"} {
		if err := ReplaceFile(ffs, name, []byte(content)); err != nil {
			t.Fatalf("ReplaceFile with fsync failing: %v", err)
		}
		if b, err := ReadFile(Default, name); err != nil || string(b) != content {
			t.Fatalf("read %q %v, want %q", b, err, content)
		}
	}
	ffs.Fail(OpRename, ErrInjected)
	if err := ReplaceFile(ffs, name, []byte("three")); !errors.Is(err, ErrInjected) {
		t.Fatalf("failing rename: %v", err)
	}
	if b, _ := ReadFile(Default, name); string(b) != "two" {
		t.Fatalf("content after failed replace %q", b)
	}
	if _, err := os.Stat(name + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
}

func TestFaultFS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ffs := NewFaultFS(Default)
	f, err := ffs.OpenFile(filepath.Join(dir, "a"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ffs.DiskFull(3)
	n, err := f.Write([]byte("hello"))
	if n != 3 || !errors.Is(err, syscall.ENOSPC) || ffs.Written() != 3 {
		t.Fatalf("partial write: %d %v (written %d)", n, err, ffs.Written())
	}
	ffs.DiskFull(-1)
	ops := []struct {
		op  Op
		run func() error
	}{
		{OpWrite, func() error { _, err := f.Write([]byte("x")); return err }},
		{OpSync, f.Sync},
		{OpTruncate, func() error { return f.Truncate(0) }},
		{OpRead, func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
		{OpOpen, func() error { _, err := ffs.OpenFile(filepath.Join(dir, "b"), os.O_CREATE, 0o644); return err }},
		{OpRename, func() error { return ffs.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "c")) }},
		{OpRemove, func() error { return ffs.Remove(filepath.Join(dir, "a")) }},
	}
	for _, o := range ops {
		ffs.Fail(o.op, syscall.EIO)
		if err := o.run(); !errors.Is(err, syscall.EIO) {
			t.Errorf("op %d: %v, want EIO", o.op, err)
		}
		ffs.Fail(o.op, nil)
	}
	if u, ok := f.(interface{ Unwrap() File }); !ok || u.Unwrap().Name() != f.Name() {
		t.Fatal("fault files must expose the underlying file")
	}
}
