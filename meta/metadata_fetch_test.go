package meta

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// Entries sent to an observer are record batches that any Kafka batch
// reader accepts (CRC, one record at the entry's index), and decode back
// to the entries; damage, a partial batch or an index going back is
// refused.
func TestEntryBatches(t *testing.T) {
	t.Parallel()
	want := []fetchedEntry{
		{index: 3, term: 1, data: EncodeEntry([]state.Op{{Key: []byte("v1/topic/a"), Value: []byte{1}}})},
		{index: 7, term: 2, data: EncodeEntry(nil)},
		{index: 8, term: 2, data: bytes.Repeat([]byte{9}, 300)},
	}
	var records []byte
	for _, e := range want {
		records = appendEntryBatch(records, e.index, e.term, e.data)
	}
	it := batch.NewIterator(records)
	for i := 0; ; i++ {
		b, ok := it.Next()
		if !ok {
			break
		}
		if b.BaseOffset() != int64(want[i].index) || b.PartitionLeaderEpoch() != int32(want[i].term) || b.RecordCount() != 1 {
			t.Fatalf("batch %d: offset %d epoch %d count %d", i, b.BaseOffset(), b.PartitionLeaderEpoch(), b.RecordCount())
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	got, err := readEntryBatches(records, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want, func(a, b fetchedEntry) bool {
		return a.index == b.index && a.term == b.term && bytes.Equal(a.data, b.data)
	}) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}

	damaged := slices.Clone(records)
	damaged[len(damaged)-5] ^= 0xff
	backwards := appendEntryBatch(slices.Clone(records), 8, 2, nil)
	for name, tc := range map[string]struct {
		records []byte
		from    uint64
	}{
		"damaged":      {damaged, 3},
		"partial":      {records[:len(records)-1], 3},
		"before from":  {records, 4},
		"index repeat": {backwards, 3},
	} {
		if _, err := readEntryBatches(tc.records, tc.from); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// fetchMetadata is an observer's Fetch of the metadata log from offset
// from, served by l.
func fetchMetadata(t *testing.T, l *MetadataLog, from int64, maxWait time.Duration) kmsg.FetchResponseTopicPartition {
	t.Helper()
	return fetchMetadataAt(t, l, from, maxWait, l.leaderEpoch())
}

// fetchMetadataAt is fetchMetadata by an observer that knows the
// controller's epoch as epoch.
func fetchMetadataAt(t *testing.T, l *MetadataLog, from int64, maxWait time.Duration, epoch int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaState.ID, req.MaxWaitMillis, req.MaxBytes = 17, 9, int32(maxWait/time.Millisecond), 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = MetadataTopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = from, 1<<20, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := l.ServeFetch(context.Background(), req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch from %d: %+v", from, resp)
	}
	return resp.Topics[0].Partitions[0]
}

// fetchedIndexes are the indexes of the entries a Fetch answered, each
// checked to decode.
func fetchedIndexes(t *testing.T, sp kmsg.FetchResponseTopicPartition, from int64) []uint64 {
	t.Helper()
	entries, err := readEntryBatches(sp.RecordBatches, uint64(from))
	if err != nil {
		t.Fatal(err)
	}
	var idx []uint64
	for _, e := range entries {
		if _, err := DecodeEntry(e.data); err != nil {
			t.Fatalf("entry %d: %v", e.index, err)
		}
		idx = append(idx, e.index)
	}
	return idx
}

// The controller serves an observer the committed entries from its fetch
// offset on, waits for the next one when there is none (and answers as
// soon as it is applied; at once to an observer that does not know its
// epoch), refuses an offset past its log, and names itself on the other
// voters, which refuse.
func TestServeFetch(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	applyTopic(t, nodes, "a", 1)
	applyTopic(t, nodes, "b", 2)
	c := controller(t, nodes)
	applied := c.log.Applied()

	sp := fetchMetadata(t, c.log, 0, 0)
	idx := fetchedIndexes(t, sp, 1)
	if len(idx) < 2 || idx[len(idx)-1] != applied || sp.HighWatermark < int64(applied)+1 || sp.CurrentLeader.LeaderID != c.cfg.NodeID {
		t.Fatalf("from the start: entries %v, high watermark %d, leader %d; applied %d", idx, sp.HighWatermark, sp.CurrentLeader.LeaderID, applied)
	}
	if sp := fetchMetadata(t, c.log, int64(applied), 0); !slices.Equal(fetchedIndexes(t, sp, int64(applied)), []uint64{applied}) {
		t.Fatalf("from %d: %v", applied, fetchedIndexes(t, sp, int64(applied)))
	}

	// The long poll answers when the next entry is applied.
	got := make(chan kmsg.FetchResponseTopicPartition, 1)
	start := time.Now()
	go func() { got <- fetchMetadata(t, c.log, int64(applied)+1, 20*time.Second) }()
	time.Sleep(50 * time.Millisecond)
	applyTopic(t, nodes, "c", 3)
	select {
	case sp := <-got:
		if idx := fetchedIndexes(t, sp, int64(applied)+1); len(idx) != 1 || idx[0] != c.log.Applied() {
			t.Fatalf("the long poll answered %v, want [%d]", idx, c.log.Applied())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the long poll did not answer when the entry was applied (%v)", time.Since(start))
	}
	if sp := fetchMetadata(t, c.log, int64(c.log.Applied())+1, 0); len(sp.RecordBatches) != 0 || sp.ErrorCode != 0 {
		t.Fatalf("caught up, with no wait: %d bytes, error %d", len(sp.RecordBatches), sp.ErrorCode)
	}
	// An observer that does not know this controller's epoch is answered
	// at once (it learns the controller from the answer), not after the
	// long poll.
	start = time.Now()
	if sp := fetchMetadataAt(t, c.log, int64(c.log.Applied())+1, time.Minute, -1); sp.CurrentLeader.LeaderEpoch != c.log.leaderEpoch() {
		t.Fatalf("an observer of another epoch is told epoch %d, want %d", sp.CurrentLeader.LeaderEpoch, c.log.leaderEpoch())
	}
	if waited := time.Since(start); waited >= observerFetchMaxWait {
		t.Fatalf("an observer of another epoch waited %v: the long poll", waited)
	}

	if sp := fetchMetadata(t, c.log, int64(c.log.raft.LastIndex())+2, 0); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("past the log's end: error %d, want OFFSET_OUT_OF_RANGE", sp.ErrorCode)
	}
	for _, nd := range nodes {
		if nd == c {
			continue
		}
		sp := fetchMetadata(t, nd.log, 1, 0)
		if sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != c.cfg.NodeID || len(sp.RecordBatches) != 0 {
			t.Fatalf("node %d: error %d, leader %d, %d bytes", nd.cfg.NodeID, sp.ErrorCode, sp.CurrentLeader.LeaderID, len(sp.RecordBatches))
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.Partitions = "other", []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	if resp := c.log.ServeFetch(context.Background(), req); len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("another topic: %+v", resp)
	}

	// The controller lists the observer with the position it fetched at.
	q := c.log.Quorum()
	if len(q.Observers) != 1 || q.Observers[0].ID != 9 || q.Observers[0].LogEndOffset != int64(c.log.Applied()) {
		t.Fatalf("observers %+v, applied %d", q.Observers, c.log.Applied())
	}
}

// An observer behind the controller's compacted log is sent the latest
// snapshot's id; the snapshot comes in chunks that make the whole, and
// once the observer holds what it does, the log serves the rest (raft's
// own entries between the snapshot's records and its index are no reason
// to send it again). A snapshot the controller no longer has, or a
// position past its end, is refused.
func TestServeFetchSnapshot(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, func(c *LogConfig) { c.SnapshotThreshold, c.TrailingLogs = 4, 2 })
	for i := range 12 {
		applyTopic(t, nodes, fmt.Sprintf("t%02d", i), byte(i+1))
	}
	c := controller(t, nodes)
	if err := c.log.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	first, _ := c.log.db.FirstIndex()
	if first <= 2 {
		t.Fatalf("the log was not compacted (first index %d)", first)
	}
	sp := fetchMetadata(t, c.log, 1, 0)
	if sp.SnapshotID.EndOffset <= 1 || len(sp.RecordBatches) != 0 {
		t.Fatalf("behind the compacted log: snapshot %+v, %d bytes", sp.SnapshotID, len(sp.RecordBatches))
	}
	var whole []byte
	for {
		chunk := fetchSnapshotChunk(t, c.log, sp.SnapshotID.EndOffset, sp.SnapshotID.Epoch, int64(len(whole)), 100)
		if chunk.ErrorCode != 0 {
			t.Fatalf("chunk at %d: error %d", len(whole), chunk.ErrorCode)
		}
		if len(chunk.Bytes) > 100 {
			t.Fatalf("chunk of %d bytes, asked 100", len(chunk.Bytes))
		}
		whole = append(whole, chunk.Bytes...)
		if int64(len(whole)) >= chunk.Size {
			break
		}
	}
	holds, ops, err := state.ReadMetadataSnapshot(bytes.NewReader(whole))
	if err != nil || len(ops) == 0 {
		t.Fatalf("the reassembled snapshot: %d ops, %v", len(ops), err)
	}
	sp = fetchMetadata(t, c.log, int64(holds)+1, 0)
	if sp.SnapshotID.EndOffset > 0 {
		t.Fatalf("holding the snapshot's records (%d), the observer was sent it again", holds)
	}
	if holds < c.log.Applied() {
		if idx := fetchedIndexes(t, sp, int64(holds)+1); len(idx) == 0 || idx[0] <= holds {
			t.Fatalf("after the snapshot: entries %v", idx)
		}
	}

	if ch := fetchSnapshotChunk(t, c.log, sp.SnapshotID.EndOffset+100, 1, 0, 100); ch.ErrorCode != kerr.SnapshotNotFound.Code {
		t.Fatalf("an unknown snapshot: error %d", ch.ErrorCode)
	}
	list, _ := c.log.snaps.List()
	if ch := fetchSnapshotChunk(t, c.log, int64(list[0].Index)+1, int32(list[0].Term), list[0].Size+1, 100); ch.ErrorCode != kerr.PositionOutOfRange.Code {
		t.Fatalf("past the snapshot's end: error %d", ch.ErrorCode)
	}
}

func fetchSnapshotChunk(t *testing.T, l *MetadataLog, endOffset int64, epoch int32, pos int64, maxBytes int32) kmsg.FetchSnapshotResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchSnapshotRequest()
	req.MaxBytes = maxBytes
	rt := kmsg.NewFetchSnapshotRequestTopic()
	rt.Topic = MetadataTopic
	rp := kmsg.NewFetchSnapshotRequestTopicPartition()
	rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch, rp.Position = endOffset, epoch, pos
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := l.ServeFetchSnapshot(req)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("FetchSnapshot answered %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}
