//go:build unix

package state

import (
	"errors"
	"os"
	"syscall"
)

// lockedByOther reports whether another open of the store in dir holds
// Badger's directory lock (a flock on dir itself; dir/LOCK only holds the
// pid of the holder). Badger reports that case
// with a formatted message only (its y.Wrapf keeps no error chain), so
// the lock is probed instead; the probe's own lock is released at once.
func lockedByOther(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}
