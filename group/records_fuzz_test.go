package group

import (
	"reflect"
	"testing"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// FuzzOffsetsRecords feeds __consumer_offsets records and batches that
// may be anything: a replay errors or applies, and never panics; what it
// applies from a batch kmirror wrote is what was written.
func FuzzOffsetsRecords(f *testing.F) {
	f.Add(OffsetRecord("g", state.GroupOffset{Topic: "t", Offset: 3}).Key, OffsetRecord("g", state.GroupOffset{Topic: "t"}).Value)
	f.Add(GroupRecord(state.GroupMeta{Group: "g", Generation: 2}).Key, GroupRecord(state.GroupMeta{Group: "g"}).Value)
	f.Add([]byte{0, 0}, []byte(nil))
	f.Add([]byte{0, 2, 0, 1, 'g'}, []byte{0, 3, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		st := NewGroupsState()
		_ = st.Apply(key, value)
		raw := batch.AppendRecords(nil, 1, []batch.Record{{Key: key, Value: value}})
		b, err := batch.Parse(raw)
		if err != nil {
			t.Fatalf("a batch batch.AppendRecords wrote does not parse: %v", err)
		}
		if err := b.Verify(); err != nil {
			t.Fatalf("CRC of a written batch: %v", err)
		}
		st2 := NewGroupsState()
		err1 := NewGroupsState().Apply(key, value)
		err2 := st2.ApplyBatch(b)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("record alone: %v, in a batch: %v", err1, err2)
		}
		// Any bytes as a whole batch.
		// (Into a copy: key's spare capacity may be value's bytes.)
		if b, err := batch.Parse(append(slicesClone(key), value...)); err == nil {
			_ = NewGroupsState().ApplyBatch(b)
		}
		// The record in a transaction, then its COMMIT marker, leaves
		// what the record alone leaves; an ABORT marker leaves nothing
		// of it pending.
		if err1 != nil {
			return
		}
		txn := batch.AppendTxnRecords(nil, 1, 5, 0, []batch.Record{{Key: key, Value: value}})
		for _, commit := range []bool{true, false} {
			st3 := NewGroupsState()
			for _, raw := range [][]byte{txn, batch.AppendTxnMarker(nil, batch.TxnMarker{ProducerID: 5, Commit: commit})} {
				b, err := batch.Parse(raw)
				if err != nil {
					t.Fatal(err)
				}
				if err := st3.ApplyBatch(b); err != nil {
					t.Fatalf("commit=%v: %v", commit, err)
				}
			}
			if len(st3.Pending) != 0 {
				t.Fatalf("commit=%v: pending after the marker: %+v", commit, st3.Pending)
			}
			if commit && !reflect.DeepEqual(st3.Offsets, st2.Offsets) {
				t.Fatalf("committed in a transaction %+v, alone %+v", st3.Offsets, st2.Offsets)
			}
		}
	})
}
