package group

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// Store is the part of state.Store the coordinator uses.
type Store interface {
	CommitOffsets(group string, offs []state.GroupOffset) error
	// CommitPendingOffsets writes offsets committed in the transaction
	// of producer pid at epoch (txn_offsets.go); MaterializeOffsets
	// writes the committed offsets a transaction's commit marker made
	// (only where the store keeps a copy of what its log decided).
	CommitPendingOffsets(group string, pid int64, epoch int16, offs []state.GroupOffset) error
	MaterializeOffsets(group string, offs []state.GroupOffset) error
	GroupOffsets(group string) ([]state.GroupOffset, error)
	DeleteOffsets(group, topic string, partitions []int32) error
	PutGroupMeta(m state.GroupMeta) error
	// AppendGroupRecords writes records of group as they are (the
	// consumer group protocol's, consumer_records.go) where the
	// coordinator's log keeps them; a store that keeps no log keeps
	// nothing (the members then rejoin after a restart).
	AppendGroupRecords(group string, recs []batch.Record) error
	DeleteGroup(group string) error
	Groups() ([]state.GroupMeta, error)
}

// Config configures a Coordinator. Zero durations mean Kafka's defaults.
type Config struct {
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (3 s):
	// how long the first rebalance of an empty group waits for members.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound a member's session
	// timeout (group.min.session.timeout.ms 6 s, group.max 30 min).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxMetadataBytes bounds an offset's metadata
	// (offset.metadata.max.bytes, 4096).
	MaxMetadataBytes int
	// PartitionExists reports whether a topic partition exists; commits to
	// others are refused with UNKNOWN_TOPIC_OR_PARTITION.
	PartitionExists func(topic string, partition int32) bool
	// ConsumerProtocol enables the consumer group protocol (KIP-848:
	// "consumer" in group.coordinator.rebalance.protocols).
	ConsumerProtocol bool
	// ConsumerSessionTimeout and ConsumerHeartbeatInterval are
	// group.consumer.session.timeout.ms (45 s) and
	// group.consumer.heartbeat.interval.ms (5 s).
	ConsumerSessionTimeout, ConsumerHeartbeatInterval time.Duration
	// GroupConsumerConfig is a group's own session timeout and heartbeat
	// interval (the GROUP config resource), falling back to the two
	// above; nil means the two above for every group.
	GroupConsumerConfig func(group string) (session, heartbeat time.Duration)
	// ConsumerAssignors is group.consumer.assignors: the server-side
	// assignors members may name, the first the default.
	ConsumerAssignors []string
	// ShareProtocol enables share groups (KIP-932: "share" in
	// group.coordinator.rebalance.protocols).
	ShareProtocol bool
	// ShareSessionTimeout and ShareHeartbeatInterval are
	// group.share.session.timeout.ms (45 s) and
	// group.share.heartbeat.interval.ms (5 s); ShareMaxSize is
	// group.share.max.size (200 members).
	ShareSessionTimeout, ShareHeartbeatInterval time.Duration
	ShareMaxSize                                int
	// GroupShareConfig is a share group's own session timeout and
	// heartbeat interval (the GROUP config resource), falling back to
	// the two above; nil means the two above for every group.
	GroupShareConfig func(group string) (session, heartbeat time.Duration)
	// Topics are the topics that exist, for resolving consumer group
	// subscriptions; nil means none.
	Topics func() []TopicMeta
	// Logger receives group events; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Kafka's defaults.
const (
	DefaultInitialRebalanceDelay = 3 * time.Second
	DefaultMinSessionTimeout     = 6 * time.Second
	DefaultMaxSessionTimeout     = 30 * time.Minute
	DefaultMaxMetadataBytes      = 4096

	DefaultConsumerSessionTimeout    = 45 * time.Second
	DefaultConsumerHeartbeatInterval = 5 * time.Second

	DefaultShareSessionTimeout    = 45 * time.Second
	DefaultShareHeartbeatInterval = 5 * time.Second
	DefaultShareMaxSize           = 200
)

// NoInitialRebalanceDelay disables the initial rebalance delay (a zero
// InitialRebalanceDelay means the default).
const NoInitialRebalanceDelay = -1

func (c Config) withDefaults() Config {
	switch {
	case c.InitialRebalanceDelay == 0:
		c.InitialRebalanceDelay = DefaultInitialRebalanceDelay
	case c.InitialRebalanceDelay < 0:
		c.InitialRebalanceDelay = 0
	}
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if c.MaxMetadataBytes == 0 {
		c.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if c.ConsumerSessionTimeout == 0 {
		c.ConsumerSessionTimeout = DefaultConsumerSessionTimeout
	}
	if c.ConsumerHeartbeatInterval == 0 {
		c.ConsumerHeartbeatInterval = DefaultConsumerHeartbeatInterval
	}
	if c.GroupConsumerConfig == nil {
		session, heartbeat := c.ConsumerSessionTimeout, c.ConsumerHeartbeatInterval
		c.GroupConsumerConfig = func(string) (time.Duration, time.Duration) { return session, heartbeat }
	}
	if c.ShareSessionTimeout == 0 {
		c.ShareSessionTimeout = DefaultShareSessionTimeout
	}
	if c.ShareHeartbeatInterval == 0 {
		c.ShareHeartbeatInterval = DefaultShareHeartbeatInterval
	}
	if c.ShareMaxSize == 0 {
		c.ShareMaxSize = DefaultShareMaxSize
	}
	if c.GroupShareConfig == nil {
		session, heartbeat := c.ShareSessionTimeout, c.ShareHeartbeatInterval
		c.GroupShareConfig = func(string) (time.Duration, time.Duration) { return session, heartbeat }
	}
	if len(c.ConsumerAssignors) == 0 {
		c.ConsumerAssignors = DefaultAssignors
	}
	if c.Topics == nil {
		c.Topics = func() []TopicMeta { return nil }
	}
	if c.PartitionExists == nil {
		c.PartitionExists = func(string, int32) bool { return true }
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Coordinator coordinates every group of the node.
type Coordinator struct {
	cfg   Config
	store Store
	log   *slog.Logger

	mu     sync.Mutex
	groups map[string]*Group
	closed bool
}

// ErrClosed is returned by a coordinator after Close.
var ErrClosed = errors.New("group: coordinator closed")

// New loads every group from the store: each comes back Empty, with its
// offsets and generation; members rejoin (the store keeps no membership:
// a node that keeps group state in __consumer_offsets Loads it from
// there, members included).
func New(store Store, cfg Config) (*Coordinator, error) {
	cfg = cfg.withDefaults()
	c := &Coordinator{cfg: cfg, store: store, log: cfg.Logger, groups: map[string]*Group{}}
	metas, err := store.Groups()
	if err != nil {
		return nil, err
	}
	for _, m := range metas {
		g := c.newGroup(m.Group)
		g.protocolType, g.generation = m.ProtocolType, m.Generation
		offs, err := store.GroupOffsets(m.Group)
		if err != nil {
			return nil, err
		}
		for _, o := range offs {
			g.offsets[topicPartition{o.Topic, o.Partition}] = o
		}
		c.groups[m.Group] = g
	}
	return c, nil
}

// Close stops every timer and wakes every waiting join or sync with
// COORDINATOR_NOT_AVAILABLE, so broker workers return.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	groups := make([]*Group, 0, len(c.groups))
	for _, g := range c.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		g.shutdownLocked()
		g.mu.Unlock()
	}
}

// group returns the named group, creating it when create is set; nil when
// it does not exist (or the coordinator is closed).
func (c *Coordinator) group(name string, create bool) *Group {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	g := c.groups[name]
	if g == nil && create {
		g = c.newGroup(name)
		c.groups[name] = g
	}
	return g
}

func (c *Coordinator) newGroup(name string) *Group {
	return &Group{c: c, name: name, state: stateEmpty, members: map[string]*member{},
		static: map[string]string{}, pending: map[string]*time.Timer{}, offsets: map[topicPartition]state.GroupOffset{},
		shareOffsets: map[topicPartitionID]ShareOffset{}}
}

// removeIfDead drops a group that was deleted.
func (c *Coordinator) removeIfDead(g *Group) {
	c.mu.Lock()
	if c.groups[g.name] == g {
		delete(c.groups, g.name)
	}
	c.mu.Unlock()
}

// sortedGroups returns the groups sorted by name.
func (c *Coordinator) sortedGroups() []*Group {
	c.mu.Lock()
	out := make([]*Group, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, g)
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// newMemberID is Kafka's form: client id, a dash, a random UUID.
func newMemberID(clientID string) string { return clientID + "-" + newUUID() }

// newUUID is a random UUID in its hyphenated form.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	u := hex.EncodeToString(b[:])
	return u[:8] + "-" + u[8:12] + "-" + u[12:16] + "-" + u[16:20] + "-" + u[20:]
}

// topicsByName indexes the topics that exist by name and by id.
func (c *Coordinator) topicsByName() (map[string]TopicMeta, map[TopicID]TopicMeta) {
	byName, byID := map[string]TopicMeta{}, map[TopicID]TopicMeta{}
	for _, t := range c.cfg.Topics() {
		byName[t.Name], byID[t.ID] = t, t
	}
	return byName, byID
}
