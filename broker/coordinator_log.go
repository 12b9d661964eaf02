package broker

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"
)

// A coordinator's state lives in an internal topic, as in Kafka
// (DESIGN.md "The cluster", Coordinators): the group coordinator's in
// __consumer_offsets (group_log.go), the transaction coordinator's in
// __transaction_state (txn_log.go). The key (a group, a transactional id)
// hashes to a partition, whose leader coordinates it. coordinatorLog is
// what both share: it follows which partitions this node leads, has the
// coordinator load a partition it starts leading (its keys answer
// COORDINATOR_LOAD_IN_PROGRESS meanwhile) and unload one it stops leading
// (NOT_COORDINATOR), writes records as the leader and waits until the
// in-sync replicas hold them, and creates the topic when it is first
// needed.

// coordinatorPartitions is what a coordinator does with the partitions
// of its topic (groupLog, txnLog).
type coordinatorPartitions interface {
	// pass starts a follow pass (a pass may load and unload many).
	pass()
	// load reads partition p, one of n, led here in lead, and hands its
	// keys to the coordinator.
	load(p *partition.Partition, n int, lead partition.Leadership) error
	// unload drops the keys of partition idx of n.
	unload(idx int32, n int)
	// unloadAll drops every key: the topic is gone.
	unloadAll()
}

// Kafka's timeouts of a coordinator's own writes and reads.
const (
	coordinatorWriteTimeout    = 5 * time.Second
	coordinatorLoadReadBytes   = 1 << 20
	coordinatorTopicRetry      = time.Second
	coordinatorTopicSegmentMiB = "104857600" // offsets.topic.segment.bytes, transaction.state.log.segment.bytes
)

// coordinatorLog follows the partitions of one internal topic.
type coordinatorLog struct {
	b     *Broker
	topic string
	parts coordinatorPartitions

	// followMu makes one load or unload pass at a time: the loader's,
	// or that of the request that created the topic here.
	followMu sync.Mutex
	mu       sync.Mutex
	// loaded holds the partitions whose keys the coordinator serves,
	// with the leadership they were loaded in: a write in another
	// leadership is NOT_COORDINATOR.
	loaded map[int32]partition.Leadership
	// createMu makes one creation of the topic at a time; createFailed
	// is when the last one failed. pendingCreate is a creation the
	// controller is to make, handed to the loader (ready), and creating
	// is set while the loader's goroutine for it runs.
	createMu      sync.Mutex
	createFailed  time.Time
	pendingCreate func() error
	creating      bool

	wake chan struct{}
}

func newCoordinatorLog(b *Broker, topic string, parts coordinatorPartitions) *coordinatorLog {
	return &coordinatorLog{b: b, topic: topic, parts: parts, loaded: map[int32]partition.Leadership{},
		wake: make(chan struct{}, 1)}
}

// nudge asks the loader to compare the loaded partitions with those led
// here.
func (cl *coordinatorLog) nudge() {
	select {
	case cl.wake <- struct{}{}:
	default:
	}
}

// run is the loader: it loads and unloads partitions as leadership moves,
// until the broker closes.
func (cl *coordinatorLog) run() {
	defer cl.b.bg.Done()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-cl.b.closing:
			return
		case <-cl.wake:
		case <-retry.C:
		}
		cl.startPendingCreate()
		if failed := cl.follow(); failed {
			retry.Reset(time.Second)
		}
	}
}

// follow loads the partitions led here that are not loaded (or were loaded
// in another leadership) and unloads the others; it reports whether a load
// failed (the loader then tries again).
func (cl *coordinatorLog) follow() (failed bool) {
	cl.followMu.Lock()
	defer cl.followMu.Unlock()
	cl.parts.pass()
	t := cl.b.partitions.Topic(cl.topic)
	if t == nil { // never created, or deleted: nothing is led
		cl.mu.Lock()
		held := len(cl.loaded) > 0
		clear(cl.loaded)
		cl.mu.Unlock()
		if held {
			cl.parts.unloadAll()
		}
		return false
	}
	n := len(t.Partitions())
	im := cl.b.image()
	for i := range int32(n) {
		p := t.Partition(i)
		lead, ok := p.Leadership()
		// A partition opened before its assignment reached it counts as
		// led by the partition; the image says who leads it.
		ip := im.Partition(cl.topic, i)
		ok = ok && ip != nil && ip.Leader == im.Self()
		if lead == (partition.Leadership{}) && len(im.Brokers()) > 1 {
			// Not assigned here yet: an append now would count as
			// committed before any follower holds it. The assignment's
			// arrival nudges the loader again.
			ok = false
		}
		cl.mu.Lock()
		was, loaded := cl.loaded[i]
		cl.mu.Unlock()
		switch {
		case ok && loaded && was == lead:
		case ok && loaded && was == (partition.Leadership{}):
			// Loaded before its assignment reached it, on a node alone
			// (the only way an unassigned partition is loaded): the
			// same leadership, nothing to read again.
			cl.setLoaded(i, lead)
		case ok:
			cl.mu.Lock()
			delete(cl.loaded, i) // requests answer LOAD_IN_PROGRESS from here
			cl.mu.Unlock()
			if err := cl.parts.load(p, n, lead); err != nil {
				failed = true
				cl.b.log.Error("loading a coordinator partition; its keys answer COORDINATOR_LOAD_IN_PROGRESS "+
					"until a load succeeds", "topic", cl.topic, "partition", i, "err", err)
				continue
			}
			cl.setLoaded(i, lead)
		case loaded:
			cl.mu.Lock()
			delete(cl.loaded, i)
			cl.mu.Unlock()
			cl.parts.unload(i, n)
			cl.b.log.Debug("unloaded a coordinator partition led elsewhere now", "topic", cl.topic, "partition", i)
		}
	}
	return failed
}

func (cl *coordinatorLog) setLoaded(idx int32, lead partition.Leadership) {
	cl.mu.Lock()
	cl.loaded[idx] = lead
	cl.mu.Unlock()
}

// isLoaded reports whether partition idx is loaded.
func (cl *coordinatorLog) isLoaded(idx int32) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	_, ok := cl.loaded[idx]
	return ok
}

// partitionOf returns key's partition and the leadership it was loaded
// in; nil when the topic does not exist. A partition not loaded here is
// NOT_COORDINATOR.
func (cl *coordinatorLog) partitionOf(key string) (*partition.Partition, partition.Leadership, error) {
	t := cl.b.partitions.Topic(cl.topic)
	if t == nil || len(t.Partitions()) == 0 {
		return nil, partition.Leadership{}, nil
	}
	idx := int32(meta.CoordinatorPartition(key, len(t.Partitions())))
	cl.mu.Lock()
	lead, ok := cl.loaded[idx]
	cl.mu.Unlock()
	if !ok {
		return nil, lead, kerr.NotCoordinator
	}
	return t.Partition(idx), lead, nil
}

// loadCode is the error code of a request for key on a node that leads
// its partition: COORDINATOR_LOAD_IN_PROGRESS until the partition is
// loaded.
func (cl *coordinatorLog) loadCode(key string) int16 {
	if _, _, err := cl.partitionOf(key); err != nil {
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// belongsTo selects the keys of partition idx of n.
func belongsTo(idx int32, n int) func(string) bool {
	return func(key string) bool { return meta.CoordinatorPartition(key, n) == int(idx) }
}

// write appends raw (with appendFn) to p as its leader in lead and waits
// until the in-sync replicas hold it (acks=all), with the errors Kafka's
// coordinators answer for a failed write: NOT_COORDINATOR when the
// leadership moved, COORDINATOR_NOT_AVAILABLE otherwise (tooLarge for a
// batch above the topic's limit).
func (cl *coordinatorLog) write(p *partition.Partition, lead partition.Leadership, raw []byte,
	appendFn func([]byte) (storage.AppendResult, partition.Leadership, error), tooLarge *kerr.Error) error {
	if minISR := cl.b.MinInsyncReplicas(cl.topic); p.ISRSize() < minISR {
		return kerr.CoordinatorNotAvailable
	}
	res, now, err := appendFn(raw)
	switch {
	case errors.Is(err, partition.ErrNotLeader) || err == nil && now != lead:
		return kerr.NotCoordinator
	case errors.Is(err, batch.ErrTooLarge):
		return tooLarge
	case err != nil:
		cl.b.log.Warn("appending to a coordinator partition failed", "topic", cl.topic, "partition", p.Index(), "err", err)
		return fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
	}
	p.Appended()
	switch p.AwaitCommitted(res.LastOffset+1, lead, coordinatorWriteTimeout, cl.b.closing) {
	case partition.CommitTimedOut:
		return kerr.CoordinatorNotAvailable
	case partition.CommitLostLeadership:
		return kerr.NotCoordinator
	}
	return nil
}

// replay hands every batch of p's log to apply and returns the log end it
// read to.
func replay(p *partition.Partition, apply func(batch.Batch) error) (int64, error) {
	off, end := p.LogStartOffset(), p.LogEndOffset()
	var buf []byte
	for off < end {
		data, _, err := p.Read(off, coordinatorLoadReadBytes, end, buf[:0])
		if err != nil {
			return 0, fmt.Errorf("reading offset %d: %w", off, err)
		}
		buf = data
		it := batch.NewIterator(data)
		start := off
		for bt, ok := it.Next(); ok; bt, ok = it.Next() {
			if bt.NextOffset() <= off {
				continue
			}
			if err := apply(bt); err != nil {
				return 0, err
			}
			off = bt.NextOffset()
		}
		if err := it.Err(); err != nil {
			return 0, fmt.Errorf("reading offset %d: %w", off, err)
		}
		if off == start {
			return 0, fmt.Errorf("no batch after offset %d below the log end %d", off, end)
		}
	}
	return end, nil
}

// ready reports whether the topic exists here, and when it does not, has
// it created with create (see createCoordinatorTopic). One creation at a
// time; after a failed one the others answer false for
// coordinatorTopicRetry without trying.
//
// On the controller (or alone) the topic is created at once, and the
// caller waits. Elsewhere the creation is forwarded to the controller,
// and the loader sends it while ready answers false (the caller answers
// COORDINATOR_NOT_AVAILABLE, which clients retry, as Kafka's brokers do
// while their AutoTopicCreationManager waits): the controller serves a
// node's forwarded requests in order, so a forwarded creation may wait
// behind a failover this node forwarded, whose final sync waits for this
// node's coordinators. A handler holding createMu for that wait stalled
// every request for the node's groups until the failover gave up.
func (cl *coordinatorLog) ready(create func() error) bool {
	exists := func() bool {
		return cl.b.image().Topic(cl.topic) != nil || cl.b.partitions.Topic(cl.topic) != nil
	}
	if exists() {
		return true
	}
	cl.createMu.Lock()
	defer cl.createMu.Unlock()
	if exists() {
		return true
	}
	if time.Since(cl.createFailed) < coordinatorTopicRetry {
		return false
	}
	if cl.b.forwards(createTopicsKey) {
		if cl.pendingCreate == nil {
			cl.pendingCreate = create
			cl.nudge()
		}
		return false
	}
	if err := create(); err != nil {
		cl.createFailedNow(err)
		return false
	}
	// Load the new, empty partitions led here now rather than answer the
	// client's next request COORDINATOR_LOAD_IN_PROGRESS.
	cl.follow()
	return exists()
}

// startPendingCreate starts the creation ready handed to the loader, if
// any, on a goroutine of its own: the forward may wait long (see ready),
// and the loader must go on loading the partitions meanwhile. Called by
// the loader only, so the goroutine is counted in b.bg while the loader
// is (Close waits for both).
func (cl *coordinatorLog) startPendingCreate() {
	cl.createMu.Lock()
	defer cl.createMu.Unlock()
	create := cl.pendingCreate
	if create == nil || cl.creating {
		return
	}
	cl.creating = true
	cl.b.bg.Add(1)
	go func() {
		defer cl.b.bg.Done()
		err := create()
		cl.createMu.Lock()
		cl.pendingCreate, cl.creating = nil, false
		if err != nil {
			cl.createFailedNow(err)
		}
		cl.createMu.Unlock()
		cl.nudge() // load what the creation made led here
	}()
}

// createFailedNow records a failed creation. REQUIRES: createMu held.
func (cl *coordinatorLog) createFailedNow(err error) {
	cl.createFailed = time.Now()
	cl.b.log.Warn("creating an internal topic failed; its coordinator answers COORDINATOR_NOT_AVAILABLE until it exists",
		"topic", cl.topic, "err", err)
}

// readOnce returns read's answer, read at the first call only.
func readOnce[T any](read func() ([]T, error)) func() ([]T, error) {
	var got []T
	var err error
	done := false
	return func() ([]T, error) {
		if !done {
			got, err = read()
			done = true
		}
		return got, err
	}
}

// coordinatorTopicConfigs are the configs of an internal topic (those
// createCoordinatorTopic's caller adds aside).
func coordinatorTopicConfigs() map[string]string {
	return map[string]string{"cleanup.policy": "compact", "segment.bytes": coordinatorTopicSegmentMiB,
		"compression.type": "producer"}
}

// createCoordinatorTopic creates an internal topic with Kafka's shape:
// compacted, 100 MiB segments, the replication factor capped by the
// usable brokers, min.insync.replicas minISR capped by that (none when
// 0), plus extra; on this node when it is the controller (or alone), else
// by the controller, forwarded as this node (the topic is the cluster's,
// whoever's request brought it about, as Kafka's AutoTopicCreationManager
// creates internal topics as the broker).
func (b *Broker) createCoordinatorTopic(name string, partitions int32, rf, minISR int, extra map[string]string) error {
	if usable, err := b.usableBrokers(); err == nil && usable < rf {
		rf = max(usable, 1)
	}
	configs := coordinatorTopicConfigs()
	if minISR > 0 {
		configs["min.insync.replicas"] = strconv.Itoa(min(minISR, rf))
	}
	for k, v := range extra {
		configs[k] = v
	}
	if !b.forwards(createTopicsKey) {
		_, err := b.partitions.Create(name, partitions, configs, [16]byte{}, "", partition.Placement{RF: rf})
		if errors.Is(err, partition.ErrTopicExists) {
			err = nil
		}
		return err
	}
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, int16(rf)
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, &v
		rt.Configs = append(rt.Configs, c)
	}
	// As this node: the principal its controller connection has (the
	// CONTROLLER listener is PLAINTEXT), which holds CLUSTER_ACTION.
	self := &forwardedIdentity{principal: anonymousPrincipal, host: "127.0.0.1"}
	if err := b.createOnController(nil, self, 0, []byte("kmirror-node-"+strconv.Itoa(int(b.cfg.NodeID))), rt); err != nil {
		return fmt.Errorf("replication factor %d: %w", rf, err)
	}
	return nil
}
