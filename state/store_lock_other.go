//go:build !unix

package state

// lockedByOther: Badger locks no directory outside unix.
func lockedByOther(string) bool { return false }
