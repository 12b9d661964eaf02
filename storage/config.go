package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/vfs"
)

// Config is the per-partition log configuration. Field names follow the
// Kafka topic configs they come from; zero values mean the documented
// default (see DefaultConfig).
type Config struct {
	// SegmentBytes rolls the active segment past this size (segment.bytes,
	// default 1 GiB).
	SegmentBytes int64
	// SegmentMs rolls the active segment when its first batch is older
	// than this (segment.ms, default 7 days).
	SegmentMs int64
	// IndexIntervalBytes is the byte distance between sparse index entries
	// (index.interval.bytes, default 4096).
	IndexIntervalBytes int64
	// RetentionMs deletes segments whose newest timestamp is older
	// (retention.ms, default 7 days, -1 unlimited).
	RetentionMs int64
	// RetentionBytes deletes the oldest segments while the log is larger
	// (retention.bytes, default -1 unlimited).
	RetentionBytes int64
	// FlushMessages fsyncs after this many appended records
	// (flush.messages, default unlimited: rely on the page cache, as Kafka does).
	FlushMessages int64
	// FlushMs fsyncs when the oldest unflushed append is older
	// (flush.ms, default unlimited). Checked by FlushIfDue.
	FlushMs int64
	// ProducerIDExpirationMs forgets idle producers
	// (producer.id.expiration.ms, default 1 day).
	ProducerIDExpirationMs int64
	// Compact turns on Log.Compact (cleanup.policy contains compact).
	// Retention is separate: for cleanup.policy=compact alone, set
	// RetentionMs and RetentionBytes to -1.
	Compact bool
	// DeleteRetentionMs keeps a compacted log's tombstones this long after
	// their segment's newest timestamp (delete.retention.ms, default 1 day).
	DeleteRetentionMs int64
	// MinCompactionLagMs keeps a segment out of compaction until its newest
	// timestamp is this old (min.compaction.lag.ms, default 0).
	MinCompactionLagMs int64

	// ExternalHighWatermark makes the log's owner move the high watermark
	// (SetHighWatermark) instead of every append: a partition leader
	// commits what its in-sync replicas hold, and a restarted node starts
	// from its replication-offset-checkpoint. When it is set, Open starts
	// the high watermark at the log start. When it is not (the default:
	// tools, tests, a log that is its own only replica), every append
	// raises it to the log end and Open starts it at the log end.
	ExternalHighWatermark bool

	// FS is the file system; nil means the operating system's.
	FS vfs.FS
	// Logger receives recovery and error reports; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// MinSegmentBytes is the smallest segment.bytes: four batch headers.
// (Kafka's floor of 14 bytes dates from legacy messages; no v2 batch fits.)
const MinSegmentBytes = 4 * batch.HeaderSize

// Defaults, Kafka's.
const (
	DefaultSegmentBytes           = 1 << 30
	DefaultSegmentMs              = 7 * 24 * 3600 * 1000
	DefaultIndexIntervalBytes     = 4096
	DefaultRetentionMs            = 7 * 24 * 3600 * 1000
	DefaultProducerIDExpirationMs = 24 * 3600 * 1000
	DefaultDeleteRetentionMs      = 24 * 3600 * 1000
	unlimited                     = -1
)

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           DefaultSegmentBytes,
		SegmentMs:              DefaultSegmentMs,
		IndexIntervalBytes:     DefaultIndexIntervalBytes,
		RetentionMs:            DefaultRetentionMs,
		RetentionBytes:         unlimited,
		FlushMessages:          unlimited,
		FlushMs:                unlimited,
		ProducerIDExpirationMs: DefaultProducerIDExpirationMs,
		DeleteRetentionMs:      DefaultDeleteRetentionMs,
	}
}

// ErrInvalidConfig marks a configuration error.
var ErrInvalidConfig = errors.New("storage: invalid config")

// withDefaults fills zero fields and validates.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	// A zero field means the documented default.
	for _, f := range []struct{ v, def *int64 }{
		{&c.SegmentBytes, &d.SegmentBytes}, {&c.SegmentMs, &d.SegmentMs},
		{&c.IndexIntervalBytes, &d.IndexIntervalBytes}, {&c.RetentionMs, &d.RetentionMs},
		{&c.RetentionBytes, &d.RetentionBytes}, {&c.FlushMessages, &d.FlushMessages},
		{&c.FlushMs, &d.FlushMs}, {&c.ProducerIDExpirationMs, &d.ProducerIDExpirationMs},
		{&c.DeleteRetentionMs, &d.DeleteRetentionMs},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	switch {
	case c.SegmentBytes < MinSegmentBytes || c.SegmentBytes > 1<<31-1:
		return c, fmt.Errorf("%w: segment.bytes %d outside [%d, %d]", ErrInvalidConfig, c.SegmentBytes, MinSegmentBytes, 1<<31-1)
	case c.SegmentMs < 1:
		return c, fmt.Errorf("%w: segment.ms %d must be positive", ErrInvalidConfig, c.SegmentMs)
	case c.IndexIntervalBytes < 0:
		return c, fmt.Errorf("%w: index.interval.bytes %d must not be negative", ErrInvalidConfig, c.IndexIntervalBytes)
	case c.RetentionMs < unlimited:
		return c, fmt.Errorf("%w: retention.ms %d below -1", ErrInvalidConfig, c.RetentionMs)
	case c.RetentionBytes < unlimited:
		return c, fmt.Errorf("%w: retention.bytes %d below -1", ErrInvalidConfig, c.RetentionBytes)
	case c.FlushMessages < unlimited:
		return c, fmt.Errorf("%w: flush.messages %d below -1", ErrInvalidConfig, c.FlushMessages)
	case c.FlushMs < unlimited:
		return c, fmt.Errorf("%w: flush.ms %d below -1", ErrInvalidConfig, c.FlushMs)
	case c.ProducerIDExpirationMs < 1:
		return c, fmt.Errorf("%w: producer.id.expiration.ms %d must be positive", ErrInvalidConfig, c.ProducerIDExpirationMs)
	case c.DeleteRetentionMs < 0:
		return c, fmt.Errorf("%w: delete.retention.ms %d must not be negative", ErrInvalidConfig, c.DeleteRetentionMs)
	case c.MinCompactionLagMs < 0:
		return c, fmt.Errorf("%w: min.compaction.lag.ms %d must not be negative", ErrInvalidConfig, c.MinCompactionLagMs)
	}
	return c, nil
}

// SetConfig replaces the log's configuration (a topic config change). The
// file system, logger, clock and ExternalHighWatermark stay those the log
// was opened with. New
// segment and retention limits apply from the next append or retention run.
func (l *Log) SetConfig(cfg Config) error {
	cfg.FS, cfg.Logger, cfg.Now = l.cfg.FS, l.cfg.Logger, l.cfg.Now
	cfg.ExternalHighWatermark = l.cfg.ExternalHighWatermark
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg
	return nil
}

// Config returns the log's configuration.
func (l *Log) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

// SpaceGuard keeps free space on a log's filesystem for another writer
// that shares it (the broker's guard keeps the state store's reserve; see
// package diskspace). Reserve grants n bytes or refuses them with an error
// that says why.
type SpaceGuard interface {
	Reserve(n int64) error
}

// SetSpaceGuard makes the log ask g before every write that grows its
// files: appends and compaction's cleaned copies. A refusal fails the
// append with ErrNoSpace, exactly as an ENOSPC would: nothing written, the
// log readable, the next append tries again. Nil removes the guard.
func (l *Log) SetSpaceGuard(g SpaceGuard) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.space = g
}

// reserveSpace asks the guard for n bytes. REQUIRES: l.mu held.
func (l *Log) reserveSpace(n int64) error {
	if l.space == nil {
		return nil
	}
	if err := l.space.Reserve(n); err != nil {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return nil
}
