// Package meta holds the cluster metadata: the immutable Image a node
// answers from (the brokers, the controller, the cluster id and, per
// partition, its leader, leader epoch, replicas and ISR) and the metadata
// log on hashicorp/raft that replicates state/'s records to every node
// (metadata_log.go, its entries in entry.go, its CONTROLLER listener and
// channel in controller_listener.go and controller_channel.go; broker-only
// nodes observe it, fetching from the controller: observer.go and
// metadata_fetch.go), and the
// controller's role on it (controller.go: registration, heartbeats,
// fencing, placement, elections, producer-id blocks, the cluster's
// identity). A node builds its Image from the records the log applied
// (ImageFromRecords; DESIGN.md "The cluster"); handlers read only the
// Image.
//
// An Image never changes once built: the node builds a new one whenever a
// topic, a partition or a leader epoch changes and publishes it with an
// atomic pointer swap, so a handler that loads one per request never sees a
// half-applied change. Lookups allocate nothing: the hot paths (Produce and
// Fetch) look a partition up per request partition.
package meta

import (
	"slices"
	"sort"
)

// Listener is one advertised endpoint of a broker.
type Listener struct {
	Name string
	Host string
	Port int32
}

// Broker is one node of the cluster as clients see it.
type Broker struct {
	ID int32
	// Rack is broker.rack, nil when unset.
	Rack *string
	// Listeners are the advertised listeners, the first being the default
	// for a client on a listener the broker does not advertise.
	Listeners []Listener
}

// Listener returns the broker's listener named name, else its first one;
// ok is false when the broker advertises none.
func (b *Broker) Listener(name string) (l Listener, ok bool) {
	for _, l := range b.Listeners {
		if l.Name == name {
			return l, true
		}
	}
	if len(b.Listeners) == 0 {
		return Listener{}, false
	}
	return b.Listeners[0], true
}

// Partition is one partition's leadership.
type Partition struct {
	// Leader is the leader's node id, -1 when the partition has none.
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	// Offline are the replicas whose log dir is offline.
	Offline []int32
}

// Topic is a topic and its partitions, in index order.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions []Partition
}

// Partition returns partition p, or nil when the topic has no such
// partition.
func (t *Topic) Partition(p int32) *Partition {
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	return &t.Partitions[p]
}

// CoordinatorKind is FindCoordinator's key type.
type CoordinatorKind int8

// Coordinator kinds, Kafka's values (FindCoordinator KeyType).
const (
	CoordinatorGroup       CoordinatorKind = 0
	CoordinatorTransaction CoordinatorKind = 1
)

// Internal topics whose partition leaders coordinate keys, as in Kafka.
const (
	GroupTopic       = "__consumer_offsets"
	TransactionTopic = "__transaction_state"
)

// Image is an immutable view of the cluster. The zero Image has no brokers
// and no topics.
type Image struct {
	clusterID  string
	controller int32
	// self is the node that built the image: the coordinator of every key
	// while the coordinator topics do not exist (one node today).
	self    int32
	brokers []Broker // by ID
	// hosts are the ids a coordinator key hashes over while the
	// coordinator topics do not exist: every registered broker, fenced
	// or not (SetCoordinatorHosts), so that a broker's absence does not
	// move the keys of the others; nil: the brokers.
	hosts  []int32
	topics map[string]*Topic
	byID   map[[16]byte]*Topic
	names  []string // sorted
}

// ClusterID is the cluster's id.
func (im *Image) ClusterID() string { return im.clusterID }

// Controller is the controller's node id (-1: none).
func (im *Image) Controller() int32 { return im.controller }

// Self is the id of the node that built the image.
func (im *Image) Self() int32 { return im.self }

// Brokers are the brokers, by id. The slice must not be modified.
func (im *Image) Brokers() []Broker { return im.brokers }

// Broker returns broker id, or nil.
func (im *Image) Broker(id int32) *Broker {
	i, ok := slices.BinarySearchFunc(im.brokers, id, func(b Broker, id int32) int { return int(b.ID) - int(id) })
	if !ok {
		return nil
	}
	return &im.brokers[i]
}

// Topic returns the topic named name, or nil.
func (im *Image) Topic(name string) *Topic { return im.topics[name] }

// TopicByID returns the topic with id, or nil.
func (im *Image) TopicByID(id [16]byte) *Topic { return im.byID[id] }

// TopicNames are the topics' names, sorted. The slice must not be
// modified.
func (im *Image) TopicNames() []string { return im.names }

// Partition returns partition p of topic name, or nil.
func (im *Image) Partition(name string, p int32) *Partition { return im.topics[name].Partition(p) }

// Coordinator returns the broker coordinating key: as in Kafka, the leader
// of partition abs(javaHash(key)) % n of the kind's internal topic. While
// that topic does not exist (each node keeps the state of the keys it
// coordinates in its own store), a node alone coordinates every key, and
// in a cluster the key hashes the same way over the registered brokers,
// fenced ones too, so every node names the same coordinator, a group is
// never split between two, and a broker that is down moves no key: its
// keys have no coordinator until it is back (their state is on it),
// which clients wait out as COORDINATOR_NOT_AVAILABLE. ok is false when the
// coordinator is unknown (no leader, or a leader that is not a broker of
// the image): Kafka's COORDINATOR_NOT_AVAILABLE.
func (im *Image) Coordinator(kind CoordinatorKind, key string) (b *Broker, ok bool) {
	name := GroupTopic
	if kind == CoordinatorTransaction {
		name = TransactionTopic
	}
	id := im.self
	switch t := im.topics[name]; {
	case t != nil && len(t.Partitions) > 0:
		id = t.Partitions[partitionFor(key, len(t.Partitions))].Leader
	case len(im.hosts) > 1:
		id = im.hosts[partitionFor(key, len(im.hosts))]
	case len(im.brokers) > 1:
		id = im.brokers[partitionFor(key, len(im.brokers))].ID
	}
	b = im.Broker(id)
	return b, b != nil
}

// CoordinatorPartition is the partition of a coordinator topic with n
// partitions that coordinates key (Kafka's partitionFor).
func CoordinatorPartition(key string, n int) int { return partitionFor(key, n) }

// partitionFor is Kafka's Utils.abs(key.hashCode()) % n, with Java's
// String.hashCode over the key's UTF-16 code units.
func partitionFor(key string, n int) int {
	var h int32
	for _, r := range key {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == -1<<31 { // Utils.abs
		h = 0
	} else if h < 0 {
		h = -h
	}
	return int(h) % n
}

// Builder assembles an Image. It is not safe for concurrent use; Build may
// be called once.
type Builder struct {
	im Image
}

// NewBuilder starts an image of cluster clusterID built by node self, with
// controller as the controller.
func NewBuilder(clusterID string, self, controller int32) *Builder {
	return &Builder{im: Image{clusterID: clusterID, self: self, controller: controller,
		topics: map[string]*Topic{}, byID: map[[16]byte]*Topic{}}}
}

// AddBroker adds a broker; a second broker with the same id replaces the
// first.
func (bd *Builder) AddBroker(b Broker) *Builder {
	for i := range bd.im.brokers {
		if bd.im.brokers[i].ID == b.ID {
			bd.im.brokers[i] = b
			return bd
		}
	}
	bd.im.brokers = append(bd.im.brokers, b)
	return bd
}

// SetCoordinatorHosts sets the ids coordinator keys hash over while the
// coordinator topics do not exist (see Coordinator).
func (bd *Builder) SetCoordinatorHosts(ids []int32) *Builder {
	bd.im.hosts = slices.Sorted(slices.Values(ids))
	return bd
}

// AddTopic adds a topic; the Builder owns t from then on.
func (bd *Builder) AddTopic(t *Topic) *Builder {
	if old := bd.im.topics[t.Name]; old != nil {
		delete(bd.im.byID, old.ID)
	}
	bd.im.topics[t.Name] = t
	if t.ID != ([16]byte{}) {
		bd.im.byID[t.ID] = t
	}
	return bd
}

// Build returns the image.
func (bd *Builder) Build() *Image {
	im := bd.im
	sort.Slice(im.brokers, func(i, j int) bool { return im.brokers[i].ID < im.brokers[j].ID })
	im.names = make([]string, 0, len(im.topics))
	for name := range im.topics {
		im.names = append(im.names, name)
	}
	sort.Strings(im.names)
	bd.im = Image{}
	return &im
}

// WithLeaderEpoch returns a copy of the image in which partition p of
// topic name has leader epoch epoch, or im itself when it has no such
// partition. Only that topic is copied; the rest is shared (all of it is
// immutable).
func (im *Image) WithLeaderEpoch(name string, p int32, epoch int32) *Image {
	old := im.topics[name]
	if old.Partition(p) == nil {
		return im
	}
	t := &Topic{Name: old.Name, ID: old.ID, Partitions: slices.Clone(old.Partitions)}
	t.Partitions[p].LeaderEpoch = epoch
	out := *im
	out.topics = make(map[string]*Topic, len(im.topics))
	for k, v := range im.topics {
		out.topics[k] = v
	}
	out.topics[name] = t
	out.byID = make(map[[16]byte]*Topic, len(im.byID))
	for k, v := range im.byID {
		out.byID[k] = v
	}
	if t.ID != ([16]byte{}) {
		out.byID[t.ID] = t
	}
	return &out
}
