// Package diskspace keeps a floor of free space on a filesystem, so that a
// writer that cannot take an ENOSPC error gracefully is never the one to
// meet the full disk.
//
// WHY: the state store (Badger) writes its write-ahead log, value log and
// tables through memory-mapped files that it creates sparse. On a full
// filesystem a store into such a page cannot be given a block and the
// kernel answers with SIGBUS, which kills the process (issue 17 item 1):
// no error reaches Badger, nothing can recover it. Every other writer of
// the node (the partition logs) uses write(2), which fails cleanly with
// ENOSPC. So the node keeps a reserve free on the state store's
// filesystem: partition appends stop above it, state writes stop at it,
// and what remains below covers what Badger may still write by itself
// (flushes and compactions of what it already holds).
//
// A Monitor answers "may I write n more bytes and keep k free?" from an
// estimate (free space at the last statfs, minus what it granted since)
// and calls statfs again every 100 ms, or at every call once the
// estimate comes near the floor, so that space freed by retention or by
// the operator is seen at once and writes resume by themselves. The
// normal path is two atomic operations and a clock read per call.
//
// Not covered: another program filling the filesystem faster than the
// reserve within one refresh interval.
package diskspace

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrLow marks a refused reservation; the error is a *LowError.
var ErrLow = errors.New("diskspace: below the free-space floor")

// LowError reports a refused reservation.
type LowError struct {
	Path     string // a directory on the filesystem
	Free     int64  // bytes free there, as last measured
	Want     int64  // bytes the refused write needed
	KeepFree int64  // the floor
}

func (e *LowError) Error() string {
	return fmt.Sprintf("%s free on the filesystem of %s, and a write of %s there would leave less than the %s kept free",
		Bytes(e.Free), e.Path, Bytes(e.Want), Bytes(e.KeepFree))
}

func (e *LowError) Unwrap() error { return ErrLow }

const (
	// refreshInterval bounds the age of the estimate: space another
	// program takes is seen within it.
	refreshInterval = 100 * time.Millisecond
	// nearFloor: within this much of the floor every call measures (a
	// statfs costs about a microsecond; a write near a full disk can pay it).
	nearFloor = 256 << 20
)

// Monitor tracks the free space of one filesystem. Its methods are safe for
// concurrent use.
type Monitor struct {
	path   string
	statfs func(path string) (int64, error)
	now    func() time.Time

	// free is the last measurement minus the bytes granted since.
	free atomic.Int64
	// due is the time (unix nanoseconds) of the next timed measurement.
	due atomic.Int64
	// mu lets one caller measure at a time; the others use the estimate.
	mu sync.Mutex
}

// New measures the filesystem of path (an existing directory) once.
func New(path string) (*Monitor, error) {
	return newMonitor(path, Statfs, time.Now)
}

func newMonitor(path string, statfs func(string) (int64, error), now func() time.Time) (*Monitor, error) {
	m := &Monitor{path: path, statfs: statfs, now: now}
	free, err := statfs(path)
	if err != nil {
		return nil, err
	}
	m.free.Store(free)
	m.due.Store(now().Add(refreshInterval).UnixNano())
	return m, nil
}

// Path is the directory the monitor measures.
func (m *Monitor) Path() string { return m.path }

// Free returns the estimated free bytes.
func (m *Monitor) Free() int64 { return m.free.Load() }

// Reserve grants n bytes when at least keepFree bytes stay free after them,
// and otherwise fails with a *LowError (wrapping ErrLow). A granted
// reservation is not given back: the bytes are written, and the next
// measurement sees them.
func (m *Monitor) Reserve(n, keepFree int64) error {
	if m.now().UnixNano() >= m.due.Load() || m.free.Load()-n < keepFree+nearFloor {
		m.measure()
	}
	return m.grant(n, keepFree)
}

func (m *Monitor) grant(n, keepFree int64) error {
	if left := m.free.Add(-n); left < keepFree {
		m.free.Add(n)
		return &LowError{Path: m.path, Free: left + n, Want: n, KeepFree: keepFree}
	}
	return nil
}

// ReserveMeasured is Reserve after a statfs, for writers that pay a disk
// write anyway (a statfs costs about a microsecond) and must see space
// that another program took since the last measurement.
func (m *Monitor) ReserveMeasured(n, keepFree int64) error {
	if free, err := m.statfs(m.path); err == nil {
		m.free.Store(free)
	}
	return m.grant(n, keepFree)
}

// measure replaces the estimate with a statfs, unless another caller is
// measuring. A failed statfs keeps the estimate: a monitoring failure must
// not stop writes that the disk can take.
func (m *Monitor) measure() {
	if !m.mu.TryLock() {
		return
	}
	defer m.mu.Unlock()
	m.due.Store(m.now().Add(refreshInterval).UnixNano())
	if free, err := m.statfs(m.path); err == nil {
		m.free.Store(free)
	}
}

// Statfs returns the bytes this process may still write on the filesystem
// of path: the free blocks for root (which may use the blocks ext4
// reserves for it, and Badger's page faults do), the blocks available to
// unprivileged users otherwise.
func Statfs(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("diskspace: statfs %s: %w", path, err)
	}
	blocks := st.Bavail
	if os.Geteuid() == 0 {
		blocks = st.Bfree
	}
	return int64(blocks) * int64(st.Bsize), nil
}

// SameFilesystem reports whether two existing paths lie on one filesystem.
func SameFilesystem(a, b string) (bool, error) {
	var sa, sb syscall.Stat_t
	if err := syscall.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("diskspace: stat %s: %w", a, err)
	}
	if err := syscall.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("diskspace: stat %s: %w", b, err)
	}
	return sa.Dev == sb.Dev, nil
}

// Bytes formats n for messages: "812 B", "3.4 MiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/unit, 0
	for ; (f >= unit || f <= -unit) && i < 4; i++ {
		f /= unit
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTP"[i])
}
