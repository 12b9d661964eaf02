package storage

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/vfs"
)

// ReplicationOffsetCheckpoint is the file, one per log directory, that
// holds the high watermark of every partition in it, as Kafka's
// ReplicaManager writes it (replica.high.watermark.checkpoint.interval.ms).
// A node that restarts starts each partition's high watermark there
// (clamped to its log), not at its log end: on a replicated partition the
// records past it may not be on the other replicas.
//
// The format is Kafka's OffsetCheckpointFile, text, one entry a line:
//
//	0                         version
//	2                         number of entries
//	orders 0 1234             topic, partition, offset, one space apart
//	orders 1 987
//
// These are part of the on-disk format (Kafka's tools and ours read it).
const ReplicationOffsetCheckpoint = "replication-offset-checkpoint"

const offsetCheckpointVersion = 0

// ErrCheckpointCorrupt is an offset checkpoint file that does not parse.
var ErrCheckpointCorrupt = errors.New("storage: malformed offset checkpoint file")

// TopicPartition names a partition in an offset checkpoint.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// AppendOffsetCheckpoint appends the checkpoint file body for offsets to
// dst, entries sorted by topic then partition so that equal maps give
// equal files.
func AppendOffsetCheckpoint(dst []byte, offsets map[TopicPartition]int64) []byte {
	keys := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		keys = append(keys, tp)
	}
	slices.SortFunc(keys, func(a, b TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	dst = strconv.AppendInt(dst, offsetCheckpointVersion, 10)
	dst = append(dst, '\n')
	dst = strconv.AppendInt(dst, int64(len(keys)), 10)
	dst = append(dst, '\n')
	for _, tp := range keys {
		dst = append(dst, tp.Topic...)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(tp.Partition), 10)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, offsets[tp], 10)
		dst = append(dst, '\n')
	}
	return dst
}

// ParseOffsetCheckpoint parses a checkpoint file body. As Kafka's
// CheckpointFile reader: an empty file is an empty checkpoint; the
// version must be 0; the file must hold exactly the announced number of
// entries; each entry is three fields. Topic names never hold spaces, so
// any other shape is ErrCheckpointCorrupt, as are a negative partition or
// offset (Kafka writes none). A later entry for a partition wins.
func ParseOffsetCheckpoint(b []byte) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	if len(b) == 0 {
		return out, nil
	}
	body, ok := strings.CutSuffix(string(b), "\n")
	if !ok {
		return nil, fmt.Errorf("%w: no final newline (a torn write?)", ErrCheckpointCorrupt)
	}
	lines := strings.Split(body, "\n")
	if v, err := strconv.Atoi(lines[0]); err != nil || v != offsetCheckpointVersion {
		return nil, fmt.Errorf("%w: unrecognised version %q", ErrCheckpointCorrupt, lines[0])
	}
	if len(lines) < 2 {
		return nil, fmt.Errorf("%w: no entry count", ErrCheckpointCorrupt)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: bad entry count %q", ErrCheckpointCorrupt, lines[1])
	}
	if n != len(lines)-2 {
		return nil, fmt.Errorf("%w: %d entries announced, %d found", ErrCheckpointCorrupt, n, len(lines)-2)
	}
	for i, line := range lines[2:] {
		f := strings.Split(line, " ")
		if len(f) != 3 || f[0] == "" {
			return nil, fmt.Errorf("%w: line %d: %q is not \"topic partition offset\"", ErrCheckpointCorrupt, i+3, line)
		}
		p, perr := strconv.ParseInt(f[1], 10, 32)
		off, oerr := strconv.ParseInt(f[2], 10, 64)
		if perr != nil || oerr != nil || p < 0 || off < 0 {
			return nil, fmt.Errorf("%w: line %d: bad partition or offset in %q", ErrCheckpointCorrupt, i+3, line)
		}
		out[TopicPartition{Topic: f[0], Partition: int32(p)}] = off
	}
	return out, nil
}

// WriteOffsetCheckpoint replaces dir's file name with offsets, atomically
// (a crash leaves the old file or the new one, never a mix).
func WriteOffsetCheckpoint(fsys vfs.FS, dir, name string, offsets map[TopicPartition]int64) error {
	if fsys == nil {
		fsys = vfs.Default
	}
	return vfs.WriteFileAtomic(fsys, dir, filepath.Join(dir, name), AppendOffsetCheckpoint(nil, offsets))
}

// ReadOffsetCheckpoint reads dir's file name. A missing file is an empty
// checkpoint (a new log directory); a malformed one is ErrCheckpointCorrupt.
func ReadOffsetCheckpoint(fsys vfs.FS, dir, name string) (map[TopicPartition]int64, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	path := filepath.Join(dir, name)
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	m, err := ParseOffsetCheckpoint(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
