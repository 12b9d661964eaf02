package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/partition"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Config configures a Manager.
type Config struct {
	// Logger receives mirror events; nil discards them.
	Logger *slog.Logger
	// Events receives the partitions' events (events.go); nil drops
	// them. It is called from the fetchers' goroutines, with no lock of
	// this package held: it must not block, nor wait on a call into the
	// Manager.
	Events func(Event)
}

// MirrorConfig is one mirror's source and fetch settings (SPEC.md section
// 3). Zero values mean the defaults named.
type MirrorConfig struct {
	Name      string
	Bootstrap []string // bootstrap.servers
	// Fetch settings: mirror.fetch.wait.max.ms (1 s), mirror.fetch.min.bytes
	// (1), mirror.fetch.response.max.bytes (10 MiB), mirror.fetch.max.bytes
	// (1 MiB per partition), mirror.fetch.backoff.ms (1 s).
	FetchWaitMax      time.Duration
	FetchMinBytes     int32
	FetchMaxBytes     int32
	PartitionMaxBytes int32
	FetchBackoff      time.Duration
	// RequestTimeout is request.timeout.ms (30 s); DialTimeout
	// socket.connection.setup.timeout.ms (10 s); ReceiveBuffer
	// mirror.socket.receive.buffer.bytes (64 KiB).
	RequestTimeout time.Duration
	DialTimeout    time.Duration
	ReceiveBuffer  int
	// Fetchers is mirror.num.replica.fetchers (1): fetchers per source
	// broker.
	Fetchers int
	// ThrottleBytesPerSecond is mirror.replication.throttled.rate: bytes
	// appended per second across the mirror, 0 unlimited.
	ThrottleBytesPerSecond int64
	// ProducerIDRewrite is producer.id.rewrite (DESIGN.md decision 2).
	ProducerIDRewrite bool
	// Dialer replaces net.Dialer (tests inject faults).
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS and SASL secure every connection to this mirror's source
	// (security.protocol and the sasl.* and ssl.* configs); nil: none.
	TLS  *tls.Config
	SASL sasl.Mechanism
}

func (c MirrorConfig) withDefaults() MirrorConfig {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.FetchWaitMax, time.Second)
	def(&c.FetchBackoff, time.Second)
	def(&c.RequestTimeout, 30*time.Second)
	def(&c.DialTimeout, 10*time.Second)
	if c.FetchMinBytes <= 0 {
		c.FetchMinBytes = 1
	}
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = 10 << 20
	}
	if c.PartitionMaxBytes <= 0 {
		c.PartitionMaxBytes = 1 << 20
	}
	if c.ReceiveBuffer == 0 {
		c.ReceiveBuffer = 64 << 10
	}
	if c.Fetchers <= 0 {
		c.Fetchers = 1
	}
	return c
}

// Manager runs every mirror's fetchers.
type Manager struct {
	log    *slog.Logger
	events func(Event)
	stats  Stats

	mu      sync.Mutex
	mirrors map[string]*mirror
	closed  bool
}

// Stats are the fetchers' counters for the metrics adapter (plain
// atomics, STYLE.md item 16).
type Stats struct {
	BytesMirrored   atomic.Int64
	BatchesMirrored atomic.Int64
	FetchRequests   atomic.Int64
	// FetchSeconds sums the duration of fetch round trips, in nanoseconds.
	FetchNanos atomic.Int64
	// ErrorsByCode counts partition errors answered by sources, by Kafka
	// error code (index; codes past the array are counted at 0).
	ErrorsByCode [160]atomic.Int64
	// ConnectionErrors counts failed dials and broken connections.
	ConnectionErrors atomic.Int64
}

// NewManager returns an empty manager.
func NewManager(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{log: cfg.Logger, events: cfg.Events, mirrors: map[string]*mirror{}}
}

// Stats returns the live counters.
func (m *Manager) Stats() *Stats { return &m.stats }

// Errors of the Go API.
var (
	ErrClosed        = errors.New("fetch: manager closed")
	ErrUnknownMirror = errors.New("fetch: unknown mirror")
	ErrMirrorExists  = errors.New("fetch: mirror already exists")
)

// AddMirror starts a mirror's metadata client. Partitions are added with
// StartPartition.
func (m *Manager) AddMirror(cfg MirrorConfig) error {
	cfg = cfg.withDefaults()
	if cfg.Name == "" || len(cfg.Bootstrap) == 0 {
		return errors.New("fetch: a mirror needs a name and bootstrap servers")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return ErrClosed
	case m.mirrors[cfg.Name] != nil:
		return fmt.Errorf("%w: %s", ErrMirrorExists, cfg.Name)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Bootstrap...), kgo.ClientID("kmirror-mirror-" + cfg.Name),
		kgo.RequestTimeoutOverhead(cfg.RequestTimeout), kgo.RetryTimeout(cfg.RequestTimeout)}
	if cfg.Dialer != nil {
		opts = append(opts, kgo.Dialer(cfg.Dialer))
	}
	if cfg.TLS != nil {
		if cfg.Dialer != nil {
			return fmt.Errorf("fetch: mirror %s: a custom Dialer and TLS cannot be combined", cfg.Name)
		}
		opts = append(opts, kgo.DialTLSConfig(cfg.TLS.Clone()))
	}
	if cfg.SASL != nil {
		opts = append(opts, kgo.SASL(cfg.SASL))
	}
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("fetch: mirror %s: %w", cfg.Name, err)
	}
	mr := newMirror(m, cfg, admin)
	m.mirrors[cfg.Name] = mr
	return nil
}

// RemoveMirror stops a mirror's fetchers and partitions.
func (m *Manager) RemoveMirror(name string) error {
	m.mu.Lock()
	mr := m.mirrors[name]
	delete(m.mirrors, name)
	m.mu.Unlock()
	if mr == nil {
		return fmt.Errorf("%w: %s", ErrUnknownMirror, name)
	}
	mr.close()
	return nil
}

func (m *Manager) mirror(name string) (*mirror, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	mr := m.mirrors[name]
	if mr == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownMirror, name)
	}
	return mr, nil
}

// StartMode says whether a (re)started partition may cut its local log to
// match the source.
type StartMode int8

const (
	// StartResume continues a partition that was mirroring (a restart, a
	// resume, a retry, a recover): the local log is never truncated
	// because of what the source answers. A source that no longer holds
	// records the copy holds fails the partition with a
	// SourceTruncatedError.
	StartResume StartMode = iota
	// StartAlign starts a partition in LOG_ALIGNMENT or ULE_RECOVERY: until
	// the source first accepts the fetch position, the local log is cut
	// where it diverges from the source (a failback's divergent tail, a
	// source's unclean election when the operator allowed it).
	StartAlign
)

// StartPartition mirrors source partition topic/partition into local,
// from local's log end. Starting a partition already mirrored (or failed)
// restarts it.
func (m *Manager) StartPartition(mirrorName, topic string, partition int32, local partition.Follower, mode StartMode) error {
	mr, err := m.mirror(mirrorName)
	if err != nil {
		return err
	}
	mr.start(topicPartition{topic, partition}, local, mode)
	return nil
}

// StopPartition stops mirroring a partition and waits until no fetcher
// appends to it any more.
func (m *Manager) StopPartition(mirrorName, topic string, partition int32) error {
	mr, err := m.mirror(mirrorName)
	if err != nil {
		return err
	}
	mr.stop(topicPartition{topic, partition})
	return nil
}

// Status returns a mirrored partition's state.
func (m *Manager) Status(mirrorName, topic string, partition int32) (Status, error) {
	mr, err := m.mirror(mirrorName)
	if err != nil {
		return Status{}, err
	}
	return mr.status(topicPartition{topic, partition})
}

// Statuses returns every mirrored partition's state, for metrics.
func (m *Manager) Statuses() []Status {
	m.mu.Lock()
	mrs := make([]*mirror, 0, len(m.mirrors))
	for _, mr := range m.mirrors {
		mrs = append(mrs, mr)
	}
	m.mu.Unlock()
	var out []Status
	for _, mr := range mrs {
		out = append(out, mr.statuses()...)
	}
	return out
}

// Close stops every mirror.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	mrs := m.mirrors
	m.mirrors = map[string]*mirror{}
	m.mu.Unlock()
	for _, mr := range mrs {
		mr.close()
	}
}
