package partition

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/kmirror/kmirror/internal/vfs"
	"github.com/kmirror/kmirror/storage"
)

// The node's high watermarks: it sets them (its logs are opened with
// storage.Config.ExternalHighWatermark), keeps them in each log
// directory's replication-offset-checkpoint (storage.ReplicationOffsetCheckpoint,
// Kafka's file and format) and starts from there at the next open, as
// Kafka's ReplicaManager does (checkpointHighWatermarks, every
// replica.high.watermark.checkpoint.interval.ms and at shutdown).
//
// On one node every append is committed at once: Partition.Appended
// raises the high watermark to the log end after each append the node
// makes (produce, mirror appends, control batches), so a consumer sees
// exactly what it saw when the high watermark was the log end. A
// replicated leader would instead raise it to the minimum log end of its
// in-sync replicas, from its followers' fetches; acks=all waits for it
// (AwaitCommitted).

// hwCheckpoints are the checkpoint files of the log dirs: the high
// watermarks read at Open, and the bodies last written.
type hwCheckpoints struct {
	// atOpen holds each log dir's checkpointed high watermarks while Open
	// opens the partitions, nil after.
	atOpen map[string]map[storage.TopicPartition]int64
	// written is each log dir's last written checkpoint body; only
	// CheckpointHighWatermarks touches it.
	written map[string][]byte
}

// load reads every log directory's checkpoint for the partitions opened
// at start. A corrupt file is reported and skipped: its partitions start
// at their log start, then (one node) at their log end, so nothing is
// lost; Kafka would take the directory offline, which on a replicated
// node sends its partitions to other replicas.
func (h *hwCheckpoints) load(fsys vfs.FS, dirs []string, log *slog.Logger) {
	h.atOpen = map[string]map[storage.TopicPartition]int64{}
	for _, dir := range dirs {
		m, err := storage.ReadOffsetCheckpoint(fsys, dir, storage.ReplicationOffsetCheckpoint)
		if err != nil {
			log.Warn("high watermark checkpoint unreadable; its partitions start from their logs", "dir", dir, "err", err)
			continue
		}
		h.atOpen[filepath.Clean(dir)] = m
	}
}

// loaded drops the checkpoints read by load: the partitions opened from
// then on are new logs.
func (h *hwCheckpoints) loaded() { h.atOpen = nil }

// start sets a just-opened partition's high watermark: the checkpointed
// one, clamped into its log by SetHighWatermark, then the log end.
// REQUIRES: p not yet visible to handlers.
func (h *hwCheckpoints) start(p *Partition) {
	l := p.log
	if m := h.atOpen[filepath.Dir(l.Dir())]; m != nil {
		l.SetHighWatermark(m[storage.TopicPartition{Topic: p.topic.name, Partition: p.index}])
	}
	// On one node every appended record was acknowledged to its producer
	// (or mirrored from a source that had committed it), so the records
	// between the checkpoint and the log end are committed: raising the
	// high watermark to the log end loses nothing and answers as before
	// the restart. A replicated node would leave it at the checkpoint and
	// let its followers' fetches raise it.
	l.SetHighWatermark(l.LogEndOffset())
}

// CheckpointHighWatermarks writes each log directory's
// replication-offset-checkpoint with the high watermarks of the partitions
// it holds, atomically. A directory whose file would not change is not
// rewritten. REQUIRES: never called twice at once (the node's checkpoint
// loop, then its Close).
func (m *Manager) CheckpointHighWatermarks() error {
	byDir := make(map[string]map[storage.TopicPartition]int64, len(m.cfg.LogDirs))
	for _, dir := range m.cfg.LogDirs {
		byDir[filepath.Clean(dir)] = map[storage.TopicPartition]int64{}
	}
	for _, p := range m.Partitions() {
		hw := byDir[filepath.Dir(p.log.Dir())]
		if hw == nil {
			continue
		}
		hw[storage.TopicPartition{Topic: p.topic.name, Partition: p.index}] = p.log.HighWatermark()
	}
	h := &m.hw
	if h.written == nil {
		h.written = map[string][]byte{}
	}
	var errs []error
	for dir, hw := range byDir {
		body := storage.AppendOffsetCheckpoint(nil, hw)
		if prev, ok := h.written[dir]; ok && bytes.Equal(prev, body) {
			continue
		}
		if err := storage.WriteOffsetCheckpoint(m.cfg.FS, dir, storage.ReplicationOffsetCheckpoint, hw); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", dir, err))
			delete(h.written, dir)
			continue
		}
		h.written[dir] = body
	}
	return errors.Join(errs...)
}
