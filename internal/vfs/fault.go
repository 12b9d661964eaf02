package vfs

import (
	"errors"
	"io/fs"
	"sync"
	"syscall"
)

// ErrInjected is the default error a FaultFS returns.
var ErrInjected = errors.New("vfs: injected I/O error")

// Op names a kind of file-system operation for fault injection.
type Op int

// The operations a FaultFS can fail.
const (
	OpWrite Op = iota
	OpSync
	OpOpen
	OpRename
	OpRemove
	OpTruncate
	OpRead
	numOps
)

// FaultFS wraps an FS and fails chosen operations, for tests. A full disk is
// modelled by a byte budget: writes beyond it are cut short and fail with
// ENOSPC, exactly as a real full disk behaves (a partial write first).
type FaultFS struct {
	FS
	mu      sync.Mutex
	fail    [numOps]error
	budget  int64 // bytes still writable; <0 means unlimited
	written int64
}

// NewFaultFS wraps inner with no faults armed.
func NewFaultFS(inner FS) *FaultFS { return &FaultFS{FS: inner, budget: -1} }

// Fail makes every later op of that kind fail with err (nil disarms).
func (f *FaultFS) Fail(op Op, err error) {
	f.mu.Lock()
	f.fail[op] = err
	f.mu.Unlock()
}

// DiskFull lets n more bytes be written, then fails writes with ENOSPC.
// A negative n means unlimited.
func (f *FaultFS) DiskFull(n int64) {
	f.mu.Lock()
	f.budget = n
	f.mu.Unlock()
}

// Written is the number of bytes written through the wrapper.
func (f *FaultFS) Written() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.written
}

func (f *FaultFS) err(op Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fail[op]
}

// allow returns how many of n bytes may be written and the error for the rest.
func (f *FaultFS) allow(n int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[OpWrite]; err != nil {
		return 0, err
	}
	if f.budget < 0 {
		f.written += int64(n)
		return n, nil
	}
	if int64(n) <= f.budget {
		f.budget -= int64(n)
		f.written += int64(n)
		return n, nil
	}
	ok := int(f.budget)
	f.budget = 0
	f.written += int64(ok)
	return ok, syscall.ENOSPC
}

func (f *FaultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if err := f.err(OpOpen); err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *FaultFS) Rename(oldpath, newpath string) error {
	if err := f.err(OpRename); err != nil {
		return &fs.PathError{Op: "rename", Path: oldpath, Err: err}
	}
	return f.FS.Rename(oldpath, newpath)
}

func (f *FaultFS) Remove(name string) error {
	if err := f.err(OpRemove); err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	return f.FS.Remove(name)
}

func (f *FaultFS) SyncDir(dir string) error {
	if err := f.err(OpSync); err != nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: err}
	}
	return f.FS.SyncDir(dir)
}

type faultFile struct {
	File
	fs *FaultFS
}

func (w *faultFile) Write(p []byte) (int, error) {
	n, ferr := w.fs.allow(len(p))
	if n == 0 && ferr != nil {
		return 0, &fs.PathError{Op: "write", Path: w.Name(), Err: ferr}
	}
	m, err := w.File.Write(p[:n])
	if err != nil {
		return m, err
	}
	if ferr != nil {
		return m, &fs.PathError{Op: "write", Path: w.Name(), Err: ferr}
	}
	return m, nil
}

func (w *faultFile) Sync() error {
	if err := w.fs.err(OpSync); err != nil {
		return &fs.PathError{Op: "sync", Path: w.Name(), Err: err}
	}
	return w.File.Sync()
}

func (w *faultFile) Truncate(size int64) error {
	if err := w.fs.err(OpTruncate); err != nil {
		return &fs.PathError{Op: "truncate", Path: w.Name(), Err: err}
	}
	return w.File.Truncate(size)
}

func (w *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := w.fs.err(OpRead); err != nil {
		return 0, &fs.PathError{Op: "read", Path: w.Name(), Err: err}
	}
	return w.File.ReadAt(p, off)
}

func (w *faultFile) Read(p []byte) (int, error) {
	if err := w.fs.err(OpRead); err != nil {
		return 0, &fs.PathError{Op: "read", Path: w.Name(), Err: err}
	}
	return w.File.Read(p)
}

// Unwrap returns the underlying file, so the serving path can still reach
// an *os.File for sendfile.
func (w *faultFile) Unwrap() File { return w.File }
