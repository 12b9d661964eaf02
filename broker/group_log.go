package broker

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/group"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// Group state lives in __consumer_offsets, as in Kafka (DESIGN.md "The
// cluster", Coordinators): the coordinator of a group is the leader of the
// partition its name hashes to; every change of the group (a commit, an
// offset or group deleted, a new generation) is appended there as Kafka's
// records (group/records.go) and waits until the partition's in-sync
// replicas hold it before it is answered, then is written to the node's
// Badger store too. A node that becomes a partition's leader reads the
// partition and serves its groups from what it read (requests meanwhile
// answer COORDINATOR_LOAD_IN_PROGRESS); one that stops leading it drops
// them, and their members find the new leader (NOT_COORDINATOR).
//
// The topic is created when the first FindCoordinator for a group asks for
// it, as Kafka does: offsets.topic.num.partitions partitions (50),
// offsets.topic.replication.factor replicas (3, fewer when fewer brokers
// are usable), compacted. Until it exists a node keeps its groups in
// Badger alone, as before; the first load of each partition moves the
// Badger groups the log does not hold into it, so a node upgraded in place
// loses none.
//
// Write order: a commit goes to the log first, then to Badger; a deletion
// to Badger first, then to the log. Either way a crash in between leaves
// Badger with nothing the log lacks but the groups that predate the topic,
// which is how a load tells those apart.

// Kafka's defaults for the offsets topic.
const (
	DefaultOffsetsTopicPartitions        = 50
	DefaultOffsetsTopicReplicationFactor = 3
	offsetsMigrationBatchRecords         = 500
)

// groupLog is the coordinator's group.Store on __consumer_offsets, and
// what the group coordinator does with the partitions its coordinatorLog
// follows.
type groupLog struct {
	*coordinatorLog
	store *state.Store
	// stored reads the groups in Badger once per follow pass.
	stored func() ([]state.GroupMeta, error)
}

func newGroupLog(b *Broker, store *state.Store) *groupLog {
	gl := &groupLog{store: store}
	gl.coordinatorLog = newCoordinatorLog(b, meta.GroupTopic, gl)
	return gl
}

// pass reads the groups in Badger once, at their first use in the pass:
// one pass loads and unloads many partitions, each of which looks only at
// its own groups.
func (gl *groupLog) pass() { gl.stored = readOnce(gl.store.Groups) }

func (gl *groupLog) unloadAll() { gl.unloadGroups(func(string) bool { return true }) }

// load reads partition p's log and hands its groups to the coordinator.
func (gl *groupLog) load(p *partition.Partition, n int, lead partition.Leadership) error {
	idx := p.Index()
	st := group.NewGroupsState()
	end, err := replay(p, st.ApplyBatch)
	if err != nil {
		return err
	}
	metas, err := gl.stored()
	if err != nil {
		return err
	}
	belongs := belongsTo(idx, n)
	if err := gl.migrate(p, lead, belongs, metas, end, st); err != nil {
		return err
	}
	if err := gl.materialize(belongs, metas, st); err != nil {
		return err
	}
	gl.b.groups.Load(belongs, st)
	if end > 0 {
		gl.b.log.Info("loaded the groups of a __consumer_offsets partition", "partition", idx, "groups", len(st.Metas),
			"log_end", end)
	}
	return nil
}

// migrate appends the Badger groups of the partition the log does not
// hold (those that predate the topic) and adds them to st.
// metas are the groups in Badger.
func (gl *groupLog) migrate(p *partition.Partition, lead partition.Leadership, belongs func(string) bool,
	metas []state.GroupMeta, end int64, st *group.GroupsState) error {
	var recs []batch.Record
	moved := 0
	for _, m := range metas {
		if !belongs(m.Group) {
			continue
		}
		if _, ok := st.Metas[m.Group]; ok {
			continue
		}
		if len(st.Offsets[m.Group]) > 0 {
			continue
		}
		offs, err := gl.store.GroupOffsets(m.Group)
		if err != nil {
			return err
		}
		recs = append(recs, group.GroupRecord(m))
		for _, o := range offs {
			recs = append(recs, group.OffsetRecord(m.Group, o))
		}
		moved++
	}
	for len(recs) > 0 {
		k := min(len(recs), offsetsMigrationBatchRecords)
		if err := gl.append(p, lead, recs[:k]); err != nil {
			return fmt.Errorf("moving the node's groups into __consumer_offsets: %w", err)
		}
		for _, r := range recs[:k] {
			if err := st.Apply(r.Key, r.Value); err != nil {
				return err
			}
		}
		recs = recs[k:]
	}
	if moved > 0 {
		gl.b.log.Info("moved groups kept by this node alone into __consumer_offsets", "partition", p.Index(),
			"groups", moved, "from_offset", end)
	}
	return nil
}

// materialize makes the Badger store, which held metas, hold exactly st's
// groups of the partition.
func (gl *groupLog) materialize(belongs func(string) bool, metas []state.GroupMeta, st *group.GroupsState) error {
	for _, m := range metas {
		if belongs(m.Group) {
			if err := gl.store.DeleteGroup(m.Group); err != nil {
				return err
			}
		}
	}
	for _, m := range st.Metas {
		if err := gl.store.PutGroupMeta(m); err != nil {
			return err
		}
	}
	for name, offs := range st.Offsets {
		if len(offs) == 0 {
			continue
		}
		if _, ok := st.Metas[name]; !ok {
			if err := gl.store.PutGroupMeta(state.GroupMeta{Group: name}); err != nil {
				return err
			}
		}
		list := make([]state.GroupOffset, 0, len(offs))
		for _, o := range offs {
			list = append(list, o)
		}
		if err := gl.store.CommitOffsets(name, list); err != nil {
			return err
		}
	}
	return nil
}

// unload drops the partition's groups from the coordinator and from
// Badger (they stay in the log).
func (gl *groupLog) unload(idx int32, n int) { gl.unloadGroups(belongsTo(idx, n)) }

// unloadGroups drops the groups belongs selects from the coordinator and
// from Badger.
func (gl *groupLog) unloadGroups(belongs func(string) bool) {
	gl.b.groups.Unload(belongs)
	metas, err := gl.stored()
	for _, m := range metas {
		if err == nil && belongs(m.Group) {
			err = gl.store.DeleteGroup(m.Group)
		}
	}
	if err != nil {
		gl.b.log.Warn("dropping the groups of __consumer_offsets partitions not led here from the store", "err", err)
	}
}

// append writes recs to p as its leader in lead and waits until the
// in-sync replicas hold them (acks=all), with the errors Kafka's group
// coordinator answers for a failed write.
func (gl *groupLog) append(p *partition.Partition, lead partition.Leadership, recs []batch.Record) error {
	return gl.write(p, lead, batch.AppendRecords(nil, time.Now().UnixMilli(), recs), p.AppendProduce,
		kerr.InvalidCommitOffsetSize)
}

// The group.Store methods: to the log first for a write, then Badger (a
// deletion the other way round, see the top of the file).

func (gl *groupLog) CommitOffsets(name string, offs []state.GroupOffset) error {
	p, lead, err := gl.partitionOf(name)
	if err != nil {
		return err
	}
	if p != nil {
		recs := make([]batch.Record, len(offs))
		for i, o := range offs {
			recs[i] = group.OffsetRecord(name, o)
		}
		if err := gl.append(p, lead, recs); err != nil {
			return err
		}
	}
	return gl.store.CommitOffsets(name, offs)
}

// CommitPendingOffsets writes offsets committed in producer pid's
// transaction as a transactional batch of it; Badger learns them only
// from the commit marker (MaterializeOffsets).
func (gl *groupLog) CommitPendingOffsets(name string, pid int64, epoch int16, offs []state.GroupOffset) error {
	p, lead, err := gl.partitionOf(name)
	if err != nil {
		return err
	}
	if p == nil {
		// No log to hold them pending (the coordinator answers
		// COORDINATOR_NOT_AVAILABLE to groups before the topic exists).
		return kerr.CoordinatorNotAvailable
	}
	raw := batch.AppendTxnRecords(nil, time.Now().UnixMilli(), pid, epoch, group.TxnOffsetRecords(name, offs))
	return gl.write(p, lead, raw, p.AppendCoordinator, kerr.InvalidCommitOffsetSize)
}

// MaterializeOffsets writes the offsets a commit marker in the log made
// committed to Badger.
func (gl *groupLog) MaterializeOffsets(name string, offs []state.GroupOffset) error {
	return gl.store.CommitOffsets(name, offs)
}

// completeTxn decides producer pid's pending offsets in the groups of
// partition idx, whose marker was just written and is held by the
// in-sync replicas. It waits for a load of the partition in progress:
// that load may have read the log before the marker.
func (gl *groupLog) completeTxn(idx int32, pid int64, commit bool) error {
	gl.followMu.Lock()
	defer gl.followMu.Unlock()
	t := gl.b.partitions.Topic(meta.GroupTopic)
	if t == nil {
		return nil
	}
	if !gl.isLoaded(idx) {
		return nil // the next load reads the marker
	}
	return gl.b.groups.CompleteTxn(belongsTo(idx, len(t.Partitions())), pid, commit)
}

func (gl *groupLog) PutGroupMeta(m state.GroupMeta) error {
	p, lead, err := gl.partitionOf(m.Group)
	if err != nil {
		return err
	}
	if p != nil {
		if err := gl.append(p, lead, []batch.Record{group.GroupRecord(m)}); err != nil {
			return err
		}
	}
	return gl.store.PutGroupMeta(m)
}

// AppendGroupRecords writes the consumer group protocol's records of name
// to its partition (Badger keeps no copy: a loader replays them).
func (gl *groupLog) AppendGroupRecords(name string, recs []batch.Record) error {
	p, lead, err := gl.partitionOf(name)
	if err != nil || p == nil {
		return err
	}
	return gl.append(p, lead, recs)
}

func (gl *groupLog) DeleteOffsets(name, topic string, partitions []int32) error {
	p, lead, err := gl.partitionOf(name)
	if err != nil {
		return err
	}
	if err := gl.store.DeleteOffsets(name, topic, partitions); err != nil {
		return err
	}
	if p == nil {
		return nil
	}
	recs := make([]batch.Record, len(partitions))
	for i, pt := range partitions {
		recs[i] = group.OffsetTombstone(name, topic, pt)
	}
	return gl.append(p, lead, recs)
}

func (gl *groupLog) DeleteGroup(name string) error {
	p, lead, err := gl.partitionOf(name)
	if err != nil {
		return err
	}
	offs, err := gl.store.GroupOffsets(name)
	if err != nil {
		return err
	}
	if err := gl.store.DeleteGroup(name); err != nil {
		return err
	}
	if p == nil {
		return nil
	}
	recs := make([]batch.Record, 0, len(offs)+1)
	for _, o := range offs {
		recs = append(recs, group.OffsetTombstone(name, o.Topic, o.Partition))
	}
	recs = append(recs, group.GroupTombstone(name))
	return gl.append(p, lead, recs)
}

// tombstoneTopic deletes a deleted topic's offsets of the groups loaded
// here from their partitions (Kafka's coordinator does the same).
func (gl *groupLog) tombstoneTopic(topic string, forgot map[string][]int32) {
	for g, parts := range forgot {
		if err := gl.DeleteOffsets(g, topic, parts); err != nil {
			gl.b.log.Warn("deleting the offsets of a deleted topic from __consumer_offsets", "group", g, "topic", topic, "err", err)
		}
	}
}

func (gl *groupLog) GroupOffsets(name string) ([]state.GroupOffset, error) {
	return gl.store.GroupOffsets(name)
}

func (gl *groupLog) Groups() ([]state.GroupMeta, error) { return gl.store.Groups() }

// offsetsTopicReady reports whether __consumer_offsets exists here, and
// when it does not, has it created (createCoordinatorTopic).
func (b *Broker) offsetsTopicReady() bool {
	return b.groupLog.ready(func() error {
		return b.createCoordinatorTopic(meta.GroupTopic, b.cfg.OffsetsTopicPartitions,
			int(b.cfg.OffsetsTopicReplicationFactor), 0, nil)
	})
}
