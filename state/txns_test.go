package state

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// fullTxn is a record with every field set, none to its zero value.
func fullTxn(id string) Txn {
	return Txn{ID: id, ProducerID: 1<<62 - 1, Epoch: math.MaxInt16 - 1, LastProducerID: 12345, LastEpoch: 7,
		TimeoutMs: math.MaxInt32, State: 3, StartMs: 1_700_000_000_123, UpdateMs: 1_700_000_000_456,
		Partitions: []TxnPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 11},
			{Topic: "audit.log", Partition: math.MaxInt32}},
		Groups: []string{"etl", "g\x00\xff"},
		Offsets: []TxnOffset{
			{Group: "etl", Topic: "input", Partition: 2, Offset: 1 << 40, LeaderEpoch: 5, Metadata: "meta"},
			{Group: "g\x00\xff", Topic: "input", Partition: 0, Offset: 0, LeaderEpoch: -1, Metadata: ""},
		}}
}

// txnsByID returns Txns() by id, failing the test on an error.
func txnsByID(t *testing.T, s *Store) map[string]Txn {
	t.Helper()
	all, err := s.Txns()
	if err != nil {
		t.Fatalf("Txns: %v", err)
	}
	out := map[string]Txn{}
	for _, tx := range all {
		if _, dup := out[tx.ID]; dup {
			t.Fatalf("Txns returns %q twice", tx.ID)
		}
		out[tx.ID] = tx
	}
	return out
}

// Every field of a record survives PutTxn, a reopen and Txns; a Put
// replaces; ids that extend one another stay apart; DeleteTxn removes one.
func TestTxnRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	full := fullTxn("app-1")
	// A record as InitProducerID first writes it: no previous pair, no
	// transaction, negative fields.
	bare := Txn{ID: "a", ProducerID: 0, Epoch: 0, LastProducerID: -1, LastEpoch: -1, TimeoutMs: 60_000,
		State: 0, StartMs: -1, UpdateMs: 0}
	prefixed := []Txn{bare, {ID: "ab", ProducerID: 1, LastProducerID: -1, LastEpoch: -1, State: 5},
		{ID: "a\x00b", ProducerID: 2, LastProducerID: -1, LastEpoch: -1, State: -1},
		{ID: strings.Repeat("x", 300), ProducerID: 3, LastProducerID: -1, LastEpoch: -1, State: 7}}
	replaced := fullTxn("app-1")
	replaced.State, replaced.Epoch, replaced.Partitions, replaced.Offsets = 4, 0, nil, nil
	for _, tx := range append([]Txn{full, replaced}, prefixed...) {
		if err := s.PutTxn(tx); err != nil {
			t.Fatalf("PutTxn(%q): %v", tx.ID, err)
		}
	}
	want := map[string]Txn{"app-1": replaced}
	for _, tx := range prefixed {
		want[tx.ID] = tx
	}
	if got := txnsByID(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("Txns before the reopen:\n%+v\nwant\n%+v", got, want)
	}
	if err := s.PutTxn(full); err != nil {
		t.Fatal(err)
	}
	want["app-1"] = full
	s.Close()
	s = openDir(t, dir)
	defer s.Close()
	if got := txnsByID(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("Txns after the reopen:\n%+v\nwant\n%+v", got, want)
	}

	if err := s.DeleteTxn("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTxn("never-there"); err != nil {
		t.Fatalf("deleting an unknown id: %v", err)
	}
	delete(want, "a")
	if got := txnsByID(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("Txns after deleting a: %+v", got)
	}
	if err := s.PutTxn(Txn{}); err == nil {
		t.Fatal("a record without a transactional id was stored")
	}
}

// A record whose offsets have short names (group "g", topic "t", no
// metadata: 30 bytes each) is written by PutTxn like any other, so Txns
// must read it back. An unreadable record is worse than one lost: Txns
// fails as a whole, so txn.New and with it broker.New fail, and the node
// cannot start while such a transaction is open (Ongoing or Prepare,
// the states that keep offsets).
func TestTxnShortOffsetNames(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	for _, offs := range [][]TxnOffset{
		{{Group: "g", Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: -1}},
		{{Group: "g", Topic: "t", Partition: 0, Offset: 5}, {Group: "g", Topic: "t", Partition: 1, Offset: 9}},
		{{Group: "g1", Topic: "in", Partition: 0, Offset: 5}},
	} {
		tx := Txn{ID: "short", ProducerID: 1, LastProducerID: -1, LastEpoch: -1, TimeoutMs: 1000, State: 1,
			Groups: []string{offs[0].Group}, Offsets: offs}
		if err := s.PutTxn(tx); err != nil {
			t.Fatal(err)
		}
		got, err := s.Txns()
		if err != nil {
			t.Fatalf("Txns after storing %d offset(s) of group %q topic %q: %v", len(offs), offs[0].Group, offs[0].Topic, err)
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], tx) {
			t.Fatalf("Txns = %+v, want %+v", got, tx)
		}
	}
}

// A damaged record is reported as corrupt, never as a transaction.
func TestTxnCorrupt(t *testing.T) {
	t.Parallel()
	good := appendTxn(nil, fullTxn("x"))
	key := string(txnKey("x")[len(keyTxnPrefix):])
	for name, c := range map[string]struct {
		key string
		val []byte
	}{
		"empty value":           {key, nil},
		"version 2":             {key, append([]byte{2}, good[1:]...)},
		"truncated":             {key, good[:len(good)-1]},
		"trailing byte":         {key, append(append([]byte{}, good...), 0)},
		"empty id":              {"\x00", good},
		"id length too big":     {"\x05ab", good},
		"id length not minimal": {"\x81\x00", good},
		"huge partition count": {key, func() []byte {
			v := appendTxn(nil, Txn{ID: "x"})
			copy(v[len(v)-12:], []byte{0x7f, 0xff, 0xff, 0xff})
			return v
		}()},
	} {
		if _, err := decodeTxn(c.key, c.val); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	s := openMem(t)
	if err := s.PutTxn(fullTxn("ok")); err != nil {
		t.Fatal(err)
	}
	putRaw(t, s, string(txnKey("bad")), good[:10])
	if _, err := s.Txns(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("Txns with a corrupt record: %v, want ErrCorrupt naming the key", err)
	}
}

// A lazily written record is there after a clean close and reopen (Close
// flushes what no fsync carried yet).
func TestPutTxnLazy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := Txn{ID: "lazy", ProducerID: 5, Epoch: 2, LastProducerID: -1, LastEpoch: -1, TimeoutMs: 1000, State: 4}
	if err := s.PutTxnLazy(want); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTxnLazy(Txn{}); err == nil {
		t.Fatal("a record without an id was stored")
	}
	s.Close()
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Txns()
	if err != nil || len(got) != 1 || got[0].ID != "lazy" || got[0].Epoch != 2 || got[0].State != 4 {
		t.Fatalf("after a reopen: %+v %v", got, err)
	}
}
