package state

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeTxn: any key suffix and value decodes or fails with
// ErrCorrupt, never panics; what decodes re-encodes (txnKey, appendTxn)
// to the same bytes, and the invariants of checkRecord hold.
func FuzzDecodeTxn(f *testing.F) {
	suffix := func(id string) string { return string(txnKey(id)[len(keyTxnPrefix):]) }
	for _, tx := range []Txn{
		fullTxn("app-1"),
		{ID: "a", LastProducerID: -1, LastEpoch: -1, TimeoutMs: 60_000},
		{ID: strings.Repeat("t", 200), ProducerID: 5, Epoch: 3, LastProducerID: 5, LastEpoch: 2, State: 2,
			Partitions: []TxnPartition{{Topic: "t", Partition: -1}}, Groups: []string{""},
			Offsets: []TxnOffset{{Group: "etl-group", Topic: "input", Offset: -1, LeaderEpoch: -1, Metadata: "m"}}},
	} {
		f.Add(suffix(tx.ID), appendTxn(nil, tx))
	}
	good := appendTxn(nil, fullTxn("x"))
	f.Add(suffix("x"), good[:len(good)-1])
	f.Add(suffix("x"), append(bytes.Clone(good), 0))
	f.Add("", good)
	f.Add("\x81\x00", good)
	f.Add(suffix("x"), []byte{})
	f.Add(suffix("x"), []byte{1})
	f.Fuzz(func(t *testing.T, key string, v []byte) {
		decode := func(b []byte) (Txn, error) { return decodeTxn(key, b) }
		checkRecord(t, v, decode, appendTxn, func(a, b Txn) bool { return reflect.DeepEqual(a, b) })
		tx, err := decodeTxn(key, v)
		if err != nil {
			return
		}
		if got := suffix(tx.ID); got != key {
			t.Fatalf("id %q re-encodes to key suffix %x, input %x", tx.ID, got, key)
		}
	})
}
