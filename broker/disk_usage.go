package broker

import (
	"path/filepath"
	"syscall"
)

// DirSpace is the space of the filesystem holding one of the node's
// directories.
type DirSpace struct {
	// Dir is the absolute directory: a log dir (log.dirs) or, when State
	// is set, the state store's (metadata.log.dir).
	Dir   string
	State bool
	// TotalBytes and FreeBytes are the filesystem's size and the bytes an
	// unprivileged writer may still use there (statfs Bavail, as Kafka's
	// DescribeLogDirs reports UsableBytes).
	TotalBytes, FreeBytes int64
}

// DiskUsage measures each log dir and the state dir now, one statfs each
// (about a microsecond): for the metrics scrape, not for a hot path. A
// directory statfs fails on is left out (DescribeLogDirs reports it as a
// KAFKA_STORAGE_ERROR).
func (b *Broker) DiskUsage() []DirSpace {
	var out []DirSpace
	seen := map[string]bool{}
	add := func(d string, st bool) {
		abs, err := filepath.Abs(d)
		if err != nil {
			abs = filepath.Clean(d)
		}
		if seen[abs] {
			return
		}
		seen[abs] = true
		var fs syscall.Statfs_t
		if err := syscall.Statfs(abs, &fs); err != nil {
			return
		}
		out = append(out, DirSpace{Dir: abs, State: st, TotalBytes: int64(fs.Blocks) * int64(fs.Bsize),
			FreeBytes: int64(fs.Bavail) * int64(fs.Bsize)})
	}
	for _, d := range b.cfg.LogDirs {
		add(d, false)
	}
	add(b.cfg.StateDir, true)
	return out
}
