package broker

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kmirror/kmirror/storage"
)

// The node's high watermarks: it sets them (its logs are opened with
// storage.Config.ExternalHighWatermark), keeps them in each log
// directory's replication-offset-checkpoint (storage.ReplicationOffsetCheckpoint,
// Kafka's file and format) and starts from there at the next open, as
// Kafka's ReplicaManager does (checkpointHighWatermarks, every
// replica.high.watermark.checkpoint.interval.ms and at shutdown).
//
// On one node every append is committed at once: partition.appended
// raises the high watermark to the log end after each append the node
// makes (produce, mirror appends, control batches), so a consumer sees
// exactly what it saw when the high watermark was the log end. A
// replicated leader would instead raise it to the minimum log end of its
// in-sync replicas, from its followers' fetches; acks=all waits for it
// (Broker.awaitCommitted).

// DefaultHighWatermarkCheckpointInterval is Kafka's
// replica.high.watermark.checkpoint.interval.ms.
const DefaultHighWatermarkCheckpointInterval = 5 * time.Second

// loadHighWatermarkCheckpoints reads every log directory's checkpoint for
// the partitions opened at start. A corrupt file is reported and skipped:
// its partitions start at their log start, then (one node) at their log
// end, so nothing is lost; Kafka would take the directory offline, which
// on a replicated node sends its partitions to other replicas.
func (b *Broker) loadHighWatermarkCheckpoints() {
	b.hwStart = map[string]map[storage.TopicPartition]int64{}
	for _, dir := range b.cfg.LogDirs {
		m, err := storage.ReadOffsetCheckpoint(b.cfg.Log.FS, dir, storage.ReplicationOffsetCheckpoint)
		if err != nil {
			b.log.Warn("high watermark checkpoint unreadable; its partitions start from their logs", "dir", dir, "err", err)
			continue
		}
		b.hwStart[filepath.Clean(dir)] = m
	}
}

// startHighWatermark sets a just-opened partition's high watermark: the
// checkpointed one, clamped into its log by SetHighWatermark, then the log
// end. REQUIRES: p not yet visible to handlers.
func (b *Broker) startHighWatermark(p *partition) {
	l := p.log
	if m := b.hwStart[filepath.Dir(l.Dir())]; m != nil {
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

// checkpointLoop writes the checkpoints every
// HighWatermarkCheckpointInterval until Close.
func (b *Broker) checkpointLoop() {
	b.every(b.cfg.HighWatermarkCheckpointInterval, func(now time.Time) {
		if err := b.checkpointHighWatermarks(); err != nil {
			if ok, held := b.warnings.allow("hw-checkpoint", now); ok {
				b.log.Warn("writing the high watermark checkpoint failed", "held_back", held, "err", err)
			}
		}
	})
}

// checkpointHighWatermarks writes each log directory's
// replication-offset-checkpoint with the high watermarks of the partitions
// it holds, atomically. A directory whose file would not change is not
// rewritten. Called by checkpointLoop and by Close, never at once.
func (b *Broker) checkpointHighWatermarks() error {
	byDir := make(map[string]map[storage.TopicPartition]int64, len(b.cfg.LogDirs))
	for _, dir := range b.cfg.LogDirs {
		byDir[filepath.Clean(dir)] = map[storage.TopicPartition]int64{}
	}
	for _, p := range b.allPartitions() {
		m := byDir[filepath.Dir(p.log.Dir())]
		if m == nil {
			continue
		}
		m[storage.TopicPartition{Topic: p.topic.name, Partition: p.index}] = p.log.HighWatermark()
	}
	if b.hwWritten == nil {
		b.hwWritten = map[string][]byte{}
	}
	var errs []error
	for dir, m := range byDir {
		body := storage.AppendOffsetCheckpoint(nil, m)
		if prev, ok := b.hwWritten[dir]; ok && bytes.Equal(prev, body) {
			continue
		}
		if err := storage.WriteOffsetCheckpoint(b.cfg.Log.FS, dir, storage.ReplicationOffsetCheckpoint, m); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", dir, err))
			delete(b.hwWritten, dir)
			continue
		}
		b.hwWritten[dir] = body
	}
	return errors.Join(errs...)
}

// awaitCommitted waits until p's high watermark covers end (an acks=all
// produce of a batch ending before end), the deadline or shutdown, and
// reports whether it does. On one node committed ran before, so it returns
// at once without waiting; a replicated leader waits here for its
// in-sync replicas, as Kafka's DelayedProduce does.
func (b *Broker) awaitCommitted(p *partition, end int64, timeout time.Duration) bool {
	if p.log.HighWatermark() >= end {
		return true
	}
	ch := make(chan struct{}, 1)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		p.wait(ch)
		// Registered before the check: a raise between the check and the
		// wait signals ch.
		if p.log.HighWatermark() >= end {
			p.unwait(ch)
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			p.unwait(ch)
			return p.log.HighWatermark() >= end
		case <-b.closing:
			p.unwait(ch)
			return false
		}
	}
}
