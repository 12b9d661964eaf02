package txn

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// A record reads back as it was written, partitions grouped by topic in
// Kafka's value; the previous pair is not in Kafka's record and reads
// back as none; a tombstone deletes; the key is Kafka's bytes.
func TestTxnRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	in := state.Txn{ID: "etl", ProducerID: 42, Epoch: 3, LastProducerID: 41, LastEpoch: 9, TimeoutMs: 60_000,
		State: int8(Ongoing), StartMs: 100, UpdateMs: 200,
		Partitions: []state.TxnPartition{{Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}, {Topic: "a", Partition: 4}}}
	r := Record(in)
	if want := []byte{0, 0, 0, 3, 'e', 't', 'l'}; !bytes.Equal(r.Key, want) {
		t.Fatalf("key %v, want %v", r.Key, want)
	}
	raw := batch.AppendRecords(nil, 1, []batch.Record{r, Record(state.Txn{ID: "gone", State: int8(Empty)}), Tombstone("gone")})
	b, err := batch.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	rs := Records{}
	if err := rs.ApplyBatch(b); err != nil {
		t.Fatal(err)
	}
	want := in
	want.LastProducerID, want.LastEpoch = -1, -1
	want.Partitions = []state.TxnPartition{{Topic: "a", Partition: 1}, {Topic: "a", Partition: 4}, {Topic: "b", Partition: 0}}
	if len(rs) != 1 || !reflect.DeepEqual(rs["etl"], want) {
		t.Fatalf("read back %+v, want %+v", rs, want)
	}
	for name, bad := range map[string][2][]byte{
		"short key":   {{0}, r.Value},
		"short value": {r.Key, r.Value[:5]},
		"bad state":   {r.Key, Record(state.Txn{ID: "x", State: 42}).Value},
	} {
		if err := (Records{}).Apply(bad[0], bad[1]); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzTxnRecords: any key and value decode or fail cleanly; a record that
// decodes encodes back to the same state.
func FuzzTxnRecords(f *testing.F) {
	r := Record(state.Txn{ID: "a", ProducerID: 1, Partitions: []state.TxnPartition{{Topic: "t"}}})
	f.Add(r.Key, r.Value)
	f.Add(r.Key, []byte(nil))
	f.Add([]byte{0, 0}, []byte{0, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		rs := Records{}
		if err := rs.Apply(key, value); err != nil {
			return
		}
		for id, txn := range rs {
			back := Records{}
			r := Record(txn)
			if err := back.Apply(r.Key, r.Value); err != nil {
				t.Fatalf("a record written from %+v does not read: %v", txn, err)
			}
			got := back[id]
			if got.ID != txn.ID || got.ProducerID != txn.ProducerID || got.State != txn.State || len(got.Partitions) != len(txn.Partitions) {
				t.Fatalf("wrote %+v, read %+v", txn, got)
			}
		}
		if raw := batch.AppendRecords(nil, 1, []batch.Record{{Key: key, Value: value}}); raw != nil {
			if b, err := batch.Parse(raw); err == nil {
				if err := (Records{}).ApplyBatch(b); err != nil {
					t.Fatalf("the record alone decoded, in a batch: %v", err)
				}
			}
		}
	})
}
