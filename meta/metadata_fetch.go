package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// Broker-only nodes (process.roles=broker) are observers of the metadata
// log, as in KRaft: they hold no vote and no raft state, and fetch the
// committed entries from the controller over its CONTROLLER listener
// with Fetch on __cluster_metadata (partition 0), and the controller's
// latest snapshot with FetchSnapshot when the entries they miss were
// compacted away (observer.go). This file is the controller's side and
// the wire format they share:
//
//   - An entry is one record batch (magic 2, uncompressed, one record)
//     whose base offset is the entry's Raft index, whose partition leader
//     epoch is its Raft term, and whose record's value is EncodeEntry's
//     bytes. Indexes skip: raft's own entries (elections' no-ops, the
//     voters' configuration, barriers) carry no state and are not sent.
//   - The controller sends only committed entries (up to the index it has
//     applied), so an observer applies what it gets, in order, as a
//     voter's state machine would.
//   - A Fetch whose offset is before the log's first entry, where the
//     observer misses records the latest snapshot holds, is answered with
//     that snapshot's id (Kafka's SnapshotId: end offset, the snapshot's
//     Raft index + 1, and epoch, its term), which the observer then
//     fetches in chunks.

// MetadataTopic is the metadata log's name on the wire, and
// MetadataTopicID its topic id (Kafka's fixed id for it, 0...01).
const MetadataTopic = "__cluster_metadata"

var MetadataTopicID = [16]byte{15: 1}

// observerFetchMaxWait bounds a Fetch's long poll on the controller.
const observerFetchMaxWait = 5 * time.Second

// snapshotChunkMax bounds one FetchSnapshot answer. Large: raft's file
// store reads a snapshot whole at each open (its CRC), once per chunk.
const snapshotChunkMax = 8 << 20

// appendEntryBatch appends one entry as a record batch (see above).
func appendEntryBatch(dst []byte, index, term uint64, data []byte) []byte {
	rec := kmsg.Record{Value: data}
	body := rec.AppendTo(nil)[1:] // AppendTo wrote Length 0 first: one varint byte
	rec.Length = int32(len(body))
	records := rec.AppendTo(nil)
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, index)
	dst = binary.BigEndian.AppendUint32(dst, uint32(batch.HeaderSize-12+len(records)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(term))
	dst = append(dst, 2)                                 // magic
	dst = binary.BigEndian.AppendUint32(dst, 0)          // CRC, below
	dst = binary.BigEndian.AppendUint16(dst, 0)          // attributes
	dst = binary.BigEndian.AppendUint32(dst, 0)          // last offset delta
	dst = binary.BigEndian.AppendUint64(dst, 0)          // base timestamp
	dst = binary.BigEndian.AppendUint64(dst, 0)          // max timestamp
	dst = binary.BigEndian.AppendUint64(dst, ^uint64(0)) // producer id -1
	dst = binary.BigEndian.AppendUint16(dst, 0xffff)     // producer epoch -1
	dst = binary.BigEndian.AppendUint32(dst, 0xffffffff) // base sequence -1
	dst = binary.BigEndian.AppendUint32(dst, 1)          // record count
	dst = append(dst, records...)
	binary.BigEndian.PutUint32(dst[start+17:], batch.Checksum(dst[start+21:]))
	return dst
}

// fetchedEntry is one entry an observer fetched.
type fetchedEntry struct {
	index, term uint64
	data        []byte
}

// readEntryBatches decodes a Fetch answer's records: entries of strictly
// increasing indexes from from on, each batch checked (CRC, one
// uncompressed record) before its entry is returned.
func readEntryBatches(records []byte, from uint64) ([]fetchedEntry, error) {
	var out []fetchedEntry
	next := from
	it := batch.NewIterator(records)
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		index := b.BaseOffset()
		switch {
		case index < 0 || uint64(index) < next:
			return nil, fmt.Errorf("metadata log: fetched entry %d, want %d or later", index, next)
		case b.Codec() != batch.CodecNone || b.IsControl() || b.RecordCount() != 1 || b.LastOffsetDelta() != 0:
			return nil, fmt.Errorf("metadata log: fetched entry %d is not one uncompressed record", index)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(b.Records()); err != nil {
			return nil, fmt.Errorf("metadata log: fetched entry %d: %w", index, err)
		}
		if int(rec.Length) != len(b.Records())-varintSize(rec.Length) {
			return nil, fmt.Errorf("metadata log: fetched entry %d: record length %d in %d bytes", index, rec.Length, len(b.Records()))
		}
		out = append(out, fetchedEntry{index: uint64(index), term: uint64(uint32(b.PartitionLeaderEpoch())), data: rec.Value})
		next = uint64(index) + 1
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("metadata log: fetched entries: %w", err)
	}
	if it.Incomplete() {
		return nil, errors.New("metadata log: fetched entries end in a partial batch")
	}
	return out, nil
}

// varintSize is the size of n as a zigzag varint.
func varintSize(n int32) int {
	u := uint32(n<<1) ^ uint32(n>>31)
	size := 1
	for u >= 0x80 {
		u >>= 7
		size++
	}
	return size
}

// metadataPartition finds the metadata log's partition in a Fetch, by
// name or (v13+) topic id.
func metadataPartition(req *kmsg.FetchRequest) (*kmsg.FetchRequestTopic, *kmsg.FetchRequestTopicPartition) {
	for i := range req.Topics {
		t := &req.Topics[i]
		if t.Topic != MetadataTopic && t.TopicID != MetadataTopicID {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == 0 {
				return t, &t.Partitions[j]
			}
		}
	}
	return nil, nil
}

// ServeFetch answers an observer's Fetch of the metadata log: the
// committed entries from its fetch offset on (waiting up to its
// MaxWaitMillis, at most observerFetchMaxWait, when there are none yet),
// or the latest snapshot's id when it misses what only that holds.
// A cluster id other than the log's is INCONSISTENT_CLUSTER_ID;
// anything but the metadata log's partition UNKNOWN_TOPIC_OR_PARTITION
// (UNKNOWN_TOPIC_ID from v13);
// a node that is not the controller answers NOT_LEADER_OR_FOLLOWER with
// the controller it knows; an offset past this log's end (a store of
// another log) OFFSET_OUT_OF_RANGE.
func (l *MetadataLog) ServeFetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.ClusterID != nil {
		// An observer whose store holds another log's entries: fetching
		// on from its index would mix two clusters' metadata.
		id, ok, err := l.cfg.Store.LogClusterID()
		switch {
		case err != nil:
			l.cfg.Logger.Warn("serving the metadata log to an observer: reading the cluster id", "err", err)
			resp.ErrorCode = kerr.UnknownServerError.Code
			return resp
		case ok && id != *req.ClusterID:
			resp.ErrorCode = kerr.InconsistentClusterID.Code
			return resp
		}
	}
	rt, rp := metadataPartition(req)
	if rp == nil {
		// Kafka's controller answers the topics it does not have per
		// partition; there is only the metadata log here.
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.HighWatermark = rp.Partition, kerr.UnknownTopicOrPartition.Code, -1
				if req.Version >= 13 {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	st := kmsg.NewFetchResponseTopic()
	st.Topic, st.TopicID = rt.Topic, rt.TopicID
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.Partition = 0
	sp.ErrorCode = l.fillFetch(ctx, req, rp, &sp)
	st.Partitions = append(st.Partitions, sp)
	resp.Topics = append(resp.Topics, st)
	return resp
}

func (l *MetadataLog) fillFetch(ctx context.Context, req *kmsg.FetchRequest, rp *kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition) int16 {
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = l.currentLeader()
	if !l.IsController() {
		return kerr.NotLeaderForPartition.Code
	}
	from := uint64(max(rp.FetchOffset, 1))
	replica := req.ReplicaState.ID
	if req.Version < 15 {
		replica = req.ReplicaID
	}
	if from-1 > l.raft.LastIndex() {
		return kerr.OffsetOutOfRange.Code
	}
	l.recordObserver(replica, from-1)
	wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, observerFetchMaxWait)
	if rp.CurrentLeaderEpoch != sp.CurrentLeader.LeaderEpoch {
		// The observer does not know this controller yet: it learns
		// it from this answer at once, not after a long poll (its node
		// forwards requests to the controller it knows).
		wait = 0
	}
	deadline := time.Now().Add(wait)
	maxBytes := int(min(max(rp.PartitionMaxBytes, 1), max(req.MaxBytes, 1)))
	for {
		wake := l.fsm.appliedAfter(l.fsm.applied())
		read, err := l.readCommitted(from, maxBytes, false)
		if err != nil {
			l.cfg.Logger.Warn("serving the metadata log to an observer", "replica", replica, "from", from, "err", err)
			return kerr.UnknownServerError.Code
		}
		sp.HighWatermark, sp.LogStartOffset = int64(read.committed)+1, int64(read.first)
		sp.LastStableOffset = sp.HighWatermark
		if read.snapshot != nil {
			sp.SnapshotID.EndOffset, sp.SnapshotID.Epoch = int64(read.snapshot.Index)+1, int32(read.snapshot.Term)
			return 0
		}
		if len(read.records) > 0 || !time.Now().Before(deadline) {
			sp.RecordBatches = read.records
			return 0
		}
		from = read.next // what was read holds no entry of the state
		// Woken by an entry applied, or every leadershipCheck to see
		// whether this node still leads (an idle log applies nothing
		// when leadership moves).
		t := time.NewTimer(min(time.Until(deadline), leadershipCheck))
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil || !l.IsController() {
			sp.RecordBatches, sp.SnapshotID.EndOffset, sp.SnapshotID.Epoch = nil, -1, -1
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = l.currentLeader()
			if sp.CurrentLeader.LeaderID == l.cfg.NodeID {
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1 // closing: not a controller to ask again
			}
			return kerr.NotLeaderForPartition.Code
		}
	}
}

// leadershipCheck is how often a long poll checks that this node still
// leads.
const leadershipCheck = 250 * time.Millisecond

// committedRead is what readCommitted found: the record batches of the
// entries from the fetch offset on, the index the next read starts at,
// the last committed index and the log's first; or the snapshot the
// observer must fetch first.
type committedRead struct {
	records          []byte
	next             uint64
	committed, first uint64
	snapshot         *raft.SnapshotMeta
}

// readCommitted reads the committed entries from index from on, up to
// about maxBytes (at least one entry). again is set on the second try,
// after the log was compacted during the first.
//
// At or before the latest snapshot's index the snapshot is the truth: a
// voter that was sent a snapshot keeps what it had of the log above the
// compaction point, entries raft never checks again and which may not be
// the ones committed there. So an observer that misses records the
// snapshot holds is sent the snapshot, and one that holds them all reads
// on after the snapshot's index (the entries between are raft's own).
func (l *MetadataLog) readCommitted(from uint64, maxBytes int, again bool) (committedRead, error) {
	// Committed: this node has applied them, or raft has handed them to
	// the state machine (AppliedIndex counts raft's own entries too).
	r := committedRead{committed: max(l.raft.AppliedIndex(), l.fsm.applied()), next: from}
	first, err := l.db.FirstIndex()
	if err != nil {
		return r, err
	}
	r.first = first
	snap, holds, err := l.latestSnapshot()
	if err != nil {
		return r, err
	}
	if snap != nil && from <= snap.Index {
		if from-1 < holds {
			r.snapshot = snap
			return r, nil
		}
		r.next = snap.Index + 1
	}
	if r.next <= r.committed && (first == 0 || r.next < first) {
		return r, fmt.Errorf("the log starts at %d, and no snapshot holds entry %d", first, r.next)
	}
	for r.next <= r.committed && len(r.records) < maxBytes {
		var e raft.Log
		if err := l.db.GetLog(r.next, &e); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) && !again {
				return l.readCommitted(from, maxBytes, true) // compacted meanwhile: a newer snapshot covers it
			}
			return r, err
		}
		if e.Type == raft.LogCommand {
			r.records = appendEntryBatch(r.records, e.Index, e.Term, e.Data)
		}
		r.next++
	}
	return r, nil
}

// recordObserver records that observer replica fetched having applied
// entry applied, for DescribeQuorum's observers. A voter fetching (none
// does today) is not recorded.
func (l *MetadataLog) recordObserver(replica int32, applied uint64) {
	if replica < 0 || slices.ContainsFunc(l.cfg.Voters, func(v Voter) bool { return v.ID == replica }) {
		return
	}
	now := time.Now()
	l.obsMu.Lock()
	defer l.obsMu.Unlock()
	if l.observers == nil {
		l.observers = map[int32]QuorumReplica{}
	}
	r := l.observers[replica]
	r.ID, r.LogEndOffset, r.LastFetch = replica, int64(applied), now
	if applied >= max(l.raft.AppliedIndex(), l.fsm.applied()) {
		r.LastCaughtUp = now
	}
	l.observers[replica] = r
}

// currentLeader is the controller this node knows and its epoch (Raft's
// term), -1 and -1 when none is known.
func (l *MetadataLog) currentLeader() (id, epoch int32) {
	id, ok := l.Controller()
	if !ok {
		return -1, -1
	}
	return id, l.leaderEpoch()
}

// latestSnapshot is the metadata log's latest snapshot and the index of
// the last record entry it holds (raft's index of a snapshot counts its
// own entries too); nil without one.
func (l *MetadataLog) latestSnapshot() (*raft.SnapshotMeta, uint64, error) {
	list, err := l.snaps.List()
	if err != nil || len(list) == 0 {
		return nil, 0, err
	}
	snap := list[0]
	l.obsMu.Lock()
	holds, ok := l.snapshotHolds[snap.ID]
	l.obsMu.Unlock()
	if ok {
		return snap, holds, nil
	}
	_, rc, err := l.snaps.Open(snap.ID)
	if err != nil {
		return nil, 0, fmt.Errorf("opening snapshot %s: %w", snap.ID, err)
	}
	holds, err = state.MetadataSnapshotIndex(rc)
	rc.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot %s: %w", snap.ID, err)
	}
	l.obsMu.Lock()
	l.snapshotHolds = map[string]uint64{snap.ID: holds} // older ones are gone or going
	l.obsMu.Unlock()
	return snap, holds, nil
}

// ServeFetchSnapshot answers an observer's FetchSnapshot: the chunk of
// the snapshot it names from its position on. A snapshot the controller
// no longer has (a newer one replaced it) is SNAPSHOT_NOT_FOUND: the
// observer fetches again and is told the newer one.
func (l *MetadataLog) ServeFetchSnapshot(req *kmsg.FetchSnapshotRequest) *kmsg.FetchSnapshotResponse {
	resp := req.ResponseKind().(*kmsg.FetchSnapshotResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewFetchSnapshotResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchSnapshotResponseTopicPartition()
			sp.Partition, sp.SnapshotID.EndOffset, sp.SnapshotID.Epoch = rp.Partition, rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = l.currentLeader()
			switch {
			case rt.Topic != MetadataTopic || rp.Partition != 0:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !l.IsController():
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				sp.ErrorCode = l.readSnapshotChunk(rp, int(min(max(req.MaxBytes, 1), snapshotChunkMax)), &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (l *MetadataLog) readSnapshotChunk(rp kmsg.FetchSnapshotRequestTopicPartition, maxBytes int, sp *kmsg.FetchSnapshotResponseTopicPartition) int16 {
	list, err := l.snaps.List()
	if err != nil {
		return kerr.UnknownServerError.Code
	}
	for _, snap := range list {
		if int64(snap.Index)+1 != rp.SnapshotID.EndOffset || int32(snap.Term) != rp.SnapshotID.Epoch {
			continue
		}
		if rp.Position < 0 || rp.Position > snap.Size {
			return kerr.PositionOutOfRange.Code
		}
		_, rc, err := l.snaps.Open(snap.ID)
		if err != nil {
			return kerr.SnapshotNotFound.Code // removed between List and Open
		}
		defer rc.Close()
		if _, err := io.CopyN(io.Discard, rc, rp.Position); err != nil {
			return kerr.UnknownServerError.Code
		}
		chunk := make([]byte, min(int64(maxBytes), snap.Size-rp.Position))
		if _, err := io.ReadFull(rc, chunk); err != nil {
			return kerr.UnknownServerError.Code
		}
		sp.Size, sp.Position, sp.Bytes = snap.Size, rp.Position, chunk
		return 0
	}
	return kerr.SnapshotNotFound.Code
}
