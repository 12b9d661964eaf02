// Package vfs is the file-system seam of the storage layer. Production code
// uses Default (the operating system); tests wrap it with errorfs-style
// injectors (see FaultFS) to prove that I/O errors and full disks give clear
// errors and never leave corrupt data. Only what storage needs is here.
package vfs

import (
	"io"
	"io/fs"
	"os"
)

// File is an open file. *os.File implements it.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	Name() string
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Seek(offset int64, whence int) (int64, error)
}

// FS is the set of file-system operations storage performs.
type FS interface {
	// OpenFile opens a file as os.OpenFile does.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	MkdirAll(path string, perm fs.FileMode) error
	ReadDir(name string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes renames and creations inside dir durable.
	SyncDir(dir string) error
}

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }
func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFileAtomic writes data to name through a temporary file, fsyncs it,
// renames it into place and fsyncs the directory: after a crash the file
// holds either its old or its new content, never a mix.
func WriteFileAtomic(fsys FS, dir, name string, data []byte) error {
	if err := replaceFile(fsys, name, data, true); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// ReplaceFile is WriteFileAtomic without the fsyncs: readers and a process
// that restarts after a crash of this one see the old or the new content,
// never a mix, but after a machine crash the file may hold either, or be
// empty or torn. Only for files whose format detects a torn write and whose
// content can be rebuilt (the caller fsyncs it later with WriteFileAtomic).
func ReplaceFile(fsys FS, name string, data []byte) error {
	return replaceFile(fsys, name, data, false)
}

func replaceFile(fsys FS, name string, data []byte, durable bool) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		fsys.Remove(tmp)
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			fsys.Remove(tmp)
			return err
		}
	}
	if err := f.Close(); err != nil {
		fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		fsys.Remove(tmp)
		return err
	}
	return nil
}

// ReadFile reads a whole file.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
