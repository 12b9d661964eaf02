package mirror

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Mode is one way of copying the source topic.
type Mode string

// The modes (see the package doc).
const (
	ModeMirror   Mode = "mirror"
	ModeDrain    Mode = "drain"
	ModePipeline Mode = "pipeline"
)

// AllModes is the order mode=all runs them in: the ceiling first, then the
// product, then the baseline.
var AllModes = []Mode{ModeDrain, ModeMirror, ModePipeline}

// Source kinds for a source this package starts.
const (
	SourceKmirror = "kmirror"
	SourceKfake   = "kfake"
)

// Defaults. The fetch sizes and wait are the fetch package's defaults
// (mirror.fetch.response.max.bytes, mirror.fetch.max.bytes,
// mirror.fetch.wait.max.ms), so the mirror runs as configured out of the
// box and the other modes ask for exactly the same.
const (
	DefaultPartitions        = 16
	DefaultRecordSize        = 1024
	DefaultCodec             = "lz4"
	DefaultBytes             = 1 << 30
	DefaultFetchers          = 1
	DefaultFetchMaxBytes     = 10 << 20
	DefaultPartitionMaxBytes = 1 << 20
	DefaultMaxWait           = time.Second
	DefaultTopic             = "kmirror-bench"
)

// Options configure a Run. Zero values mean the defaults above.
type Options struct {
	// Partitions, RecordSize (bytes of each record value), Codec (none,
	// gzip, snappy, lz4, zstd) and Bytes (total uncompressed value bytes)
	// shape the data filled into the source once.
	Partitions int
	RecordSize int
	Codec      string
	Bytes      int64
	// Topic is the source topic; an external source gets a fresh
	// "<Topic>-<unix nanos>" that is deleted at the end.
	Topic string

	// Fetchers is mirror.num.replica.fetchers: connections per source
	// broker. The drain mode splits partitions the same way.
	Fetchers int
	// FetchMaxBytes, PartitionMaxBytes and MaxWait are the Fetch
	// response max bytes, per-partition max bytes and max wait of every
	// mode (the pipeline's consumer gets them as kgo options).
	FetchMaxBytes     int32
	PartitionMaxBytes int32
	MaxWait           time.Duration
	// Throttle is mirror.replication.throttled.rate in bytes per second,
	// 0 unlimited. Only the mirror mode has a throttle.
	Throttle int64
	// Duration ends a mode's phase early; 0 runs until caught up.
	Duration time.Duration

	// Source is an external bootstrap (comma-separated host:port); empty
	// starts a SourceKind source.
	Source     string
	SourceKind string
	// SourceExe, when set, runs the kmirror or kfake source as a child
	// process of this executable (a kmirror binary): `serve` for kmirror,
	// `bench --kfake-source` for kfake. SourceEnv is added to its
	// environment.
	SourceExe string
	SourceEnv []string

	// Modes run in this order; empty means AllModes.
	Modes []Mode
	// Consumer adds a kgo consumer on the mirror node to the mirror and
	// pipeline modes; the phase then ends when it has read every record.
	Consumer bool
	// Verify checks after each mode that the copy is complete and right:
	// mirror: the mirror's batch bytes equal the source's (SHA-256 per
	// partition); drain: every byte and offset was read; pipeline: same
	// end offsets and the same keys and values in order.
	Verify bool
	// CPUProfile, when set, profiles each mode's measured phase into this
	// file (with one mode) or into <name>-<mode><ext> (several modes).
	CPUProfile string

	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// ErrInvalidOptions marks options Run refuses.
var ErrInvalidOptions = errors.New("perf/mirror: invalid options")

// WithDefaults fills zero values with the defaults.
func (o Options) WithDefaults() Options {
	if o.Partitions == 0 {
		o.Partitions = DefaultPartitions
	}
	if o.RecordSize == 0 {
		o.RecordSize = DefaultRecordSize
	}
	if o.Codec == "" {
		o.Codec = DefaultCodec
	}
	if o.Bytes == 0 {
		o.Bytes = DefaultBytes
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Fetchers == 0 {
		o.Fetchers = DefaultFetchers
	}
	if o.FetchMaxBytes == 0 {
		o.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if o.PartitionMaxBytes == 0 {
		o.PartitionMaxBytes = DefaultPartitionMaxBytes
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.SourceKind == "" && o.Source == "" {
		o.SourceKind = SourceKmirror
	}
	if len(o.Modes) == 0 {
		o.Modes = AllModes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate checks options (after WithDefaults: a zero is not a default
// here); errors wrap ErrInvalidOptions and name the option as the command
// line spells it.
func (o Options) Validate() error {
	bad := func(flag, format string, args ...any) error {
		return fmt.Errorf("%w: --%s: %s", ErrInvalidOptions, flag, fmt.Sprintf(format, args...))
	}
	switch {
	case o.Partitions < 1 || o.Partitions > 10000:
		return bad("partitions", "must be in 1-10000, got %d", o.Partitions)
	case o.RecordSize < 1 || o.RecordSize > 1<<20:
		return bad("record-size", "must be in 1-1048576 bytes, got %d", o.RecordSize)
	case o.Bytes < int64(o.RecordSize)*int64(o.Partitions):
		return bad("bytes", "must hold at least one record per partition (%d bytes), got %d",
			int64(o.RecordSize)*int64(o.Partitions), o.Bytes)
	case o.Fetchers < 1 || o.Fetchers > 1024:
		return bad("fetchers", "must be in 1-1024, got %d", o.Fetchers)
	case o.FetchMaxBytes < 1:
		return bad("fetch-max-bytes", "must be >= 1, got %d", o.FetchMaxBytes)
	case o.PartitionMaxBytes < 1:
		return bad("partition-max-bytes", "must be >= 1, got %d", o.PartitionMaxBytes)
	case o.MaxWait < time.Millisecond || o.MaxWait > time.Duration(math.MaxInt32)*time.Millisecond:
		return bad("max-wait", "must be in 1ms-%dms, got %v", math.MaxInt32, o.MaxWait)
	case o.Throttle < 0:
		return bad("throttle", "must be >= 0, got %d", o.Throttle)
	case o.Duration < 0:
		return bad("duration", "must be >= 0, got %v", o.Duration)
	}
	if _, err := CodecByName(o.Codec); err != nil {
		return bad("codec", "%v", err)
	}
	if o.Source == "" {
		switch o.SourceKind {
		case SourceKmirror, SourceKfake:
		default:
			return bad("source-kind", "must be kmirror or kfake, got %q", o.SourceKind)
		}
	}
	seen := map[Mode]bool{}
	for _, m := range o.Modes {
		switch m {
		case ModeMirror, ModeDrain, ModePipeline:
		default:
			return bad("mode", "must be mirror, drain, pipeline or all, got %q", m)
		}
		if seen[m] {
			return bad("mode", "%s given twice", m)
		}
		seen[m] = true
	}
	return nil
}

// records is how many records the fill produces.
func (o Options) records() int64 { return o.Bytes / int64(o.RecordSize) }

// ParseModes parses a comma list of modes, or "all".
func ParseModes(s string) ([]Mode, error) {
	if s == "all" {
		return append([]Mode(nil), AllModes...), nil
	}
	var out []Mode
	for _, f := range strings.Split(s, ",") {
		m := Mode(strings.TrimSpace(f))
		switch m {
		case ModeMirror, ModeDrain, ModePipeline:
		default:
			return nil, fmt.Errorf("unknown mode %q (want mirror, drain, pipeline or all)", m)
		}
		if containsMode(out, m) {
			return nil, fmt.Errorf("mode %s given twice", m)
		}
		out = append(out, m)
	}
	return out, nil
}

func containsMode(ms []Mode, m Mode) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// CodecByName maps a codec name to kgo's codec.
func CodecByName(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown codec %q (want none, gzip, snappy, lz4 or zstd)", name)
}

// ParseBytes parses a byte count: a plain integer, or one with a suffix,
// case-insensitive: KiB, MiB, GiB, TiB (powers of 1024), K, M, G, T (also
// powers of 1024, as dd and -Xmx read them), KB, MB, GB, TB (powers of
// 1000), B. Fractions are allowed with a suffix (1.5GiB).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty size")
	}
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, suffix := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult := int64(1)
	switch suffix {
	case "", "b":
	case "k", "kib":
		mult = 1 << 10
	case "m", "mib":
		mult = 1 << 20
	case "g", "gib":
		mult = 1 << 30
	case "t", "tib":
		mult = 1 << 40
	case "kb":
		mult = 1e3
	case "mb":
		mult = 1e6
	case "gb":
		mult = 1e9
	case "tb":
		mult = 1e12
	default:
		return 0, fmt.Errorf("size %q: unknown suffix %q (want B, KiB, MiB, GiB, TiB, K, M, G, T, KB, MB, GB or TB)", s, t[i:])
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 || (n > 0 && mult > math.MaxInt64/n) {
			return 0, fmt.Errorf("size %q out of range", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("size %q: not a number with an optional unit", s)
	}
	v := f * float64(mult)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q out of range", s)
	}
	return int64(v), nil
}

// FormatBytes prints n in the largest binary unit that divides it (1GiB,
// 512KiB), else in bytes.
func FormatBytes(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
