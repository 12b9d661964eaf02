package group

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// The keys are Kafka's bytes: version, then the strings and the partition.
func TestOffsetsRecordKeysAreKafkas(t *testing.T) {
	t.Parallel()
	want := []byte{0, 1, 0, 1, 'g', 0, 2, 't', 'p', 0, 0, 0, 7}
	if got := OffsetRecord("g", state.GroupOffset{Topic: "tp", Partition: 7}).Key; !bytes.Equal(got, want) {
		t.Fatalf("offset key %v, want %v", got, want)
	}
	if got := GroupTombstone("g").Key; !bytes.Equal(got, []byte{0, 2, 0, 1, 'g'}) {
		t.Fatalf("group key %v", got)
	}
	v := OffsetRecord("g", state.GroupOffset{Offset: 5, LeaderEpoch: 3, Metadata: "m", CommitTimestamp: 9}).Value
	wantV := []byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 3, 0, 1, 'm', 0, 0, 0, 0, 0, 0, 0, 9}
	if !bytes.Equal(v, wantV) {
		t.Fatalf("offset value %v, want %v", v, wantV)
	}
}

// A batch of records replays to the state they describe: later records
// win, tombstones delete, a group tombstone takes its offsets along.
func TestOffsetsBatchReplays(t *testing.T) {
	t.Parallel()
	o1 := state.GroupOffset{Topic: "a", Partition: 0, Offset: 10, LeaderEpoch: 2, Metadata: "x", CommitTimestamp: 100}
	o2 := state.GroupOffset{Topic: "a", Partition: 1, Offset: 20, LeaderEpoch: -1, CommitTimestamp: 101}
	o1b := o1
	o1b.Offset = 11
	recs := []batch.Record{
		GroupRecord(state.GroupMeta{Group: "g", ProtocolType: "consumer", Generation: 4}),
		OffsetRecord("g", o1), OffsetRecord("g", o2), OffsetRecord("g", o1b),
		OffsetTombstone("g", "a", 1),
		GroupRecord(state.GroupMeta{Group: "gone"}), OffsetRecord("gone", o1), GroupTombstone("gone"),
		OffsetRecord("simple", o2),
	}
	raw := batch.AppendRecords(nil, 1234, recs)
	b, err := batch.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Verify(); err != nil {
		t.Fatalf("CRC: %v", err)
	}
	if b.RecordCount() != int32(len(recs)) || b.LastOffsetDelta() != int32(len(recs)-1) || b.MaxTimestamp() != 1234 ||
		b.HasProducerID() {
		t.Fatalf("header: count %d delta %d ts %d producer %v", b.RecordCount(), b.LastOffsetDelta(), b.MaxTimestamp(), b.HasProducerID())
	}
	st := NewGroupsState()
	if err := st.ApplyBatch(b); err != nil {
		t.Fatal(err)
	}
	wantMetas := map[string]state.GroupMeta{"g": {Group: "g", ProtocolType: "consumer", Generation: 4}}
	if !reflect.DeepEqual(st.Metas, wantMetas) {
		t.Errorf("metas %+v", st.Metas)
	}
	wantOffs := map[string]map[topicPartition]state.GroupOffset{
		"g":      {{"a", 0}: o1b},
		"simple": {{"a", 1}: o2},
	}
	if !reflect.DeepEqual(st.Offsets, wantOffs) {
		t.Errorf("offsets %+v, want %+v", st.Offsets, wantOffs)
	}
}

// Records kmirror cannot read fail the replay: a partition is served
// whole or not at all.
func TestOffsetsBatchRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	raw := batch.AppendRecords(nil, 1, []batch.Record{{Key: []byte{0, 1, 0, 9}, Value: []byte{0, 3}}})
	b, _ := batch.Parse(raw)
	if err := NewGroupsState().ApplyBatch(b); !errors.Is(err, ErrOffsetsRecord) {
		t.Fatalf("truncated key: %v", err)
	}
	// A consumer group record (key version 3 to 8) or a share group one
	// (10 to 15) is read, and refused when it does not decode; streams
	// group records (17 and up) are skipped.
	if err := NewGroupsState().Apply([]byte{0, 3, 0, 1, 'g'}, []byte{1, 2, 3}); !errors.Is(err, ErrOffsetsRecord) {
		t.Fatalf("a malformed KIP-848 record: %v", err)
	}
	if err := NewGroupsState().Apply([]byte{0, 11, 0, 1, 'g'}, []byte{1, 2, 3}); !errors.Is(err, ErrOffsetsRecord) {
		t.Fatalf("a malformed KIP-932 record: %v", err)
	}
	st := NewGroupsState()
	if err := st.Apply([]byte{0, 17, 0, 1, 'g'}, []byte{1, 2, 3}); err != nil ||
		len(st.Metas)+len(st.Offsets)+len(st.Consumer)+len(st.Share) != 0 {
		t.Fatalf("a streams group record: %v, %+v", err, st)
	}
	gz := slicesClone(raw)
	binary.BigEndian.PutUint16(gz[21:], 1) // gzip
	if b, _ := batch.Parse(gz); NewGroupsState().ApplyBatch(b) == nil {
		t.Fatal("a compressed batch replayed as plain records")
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }
