package group

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// Offsets committed in a transaction are pending until its marker: the
// group does not serve them, RequireStable sees them, a commit marker
// makes them the group's (the store's copy too), an abort drops them, and
// each producer's transaction decides only its own.
func TestPendingOffsetsWaitForTheMarker(t *testing.T) {
	t.Parallel()
	store := newMemStore()
	c := newCoordinator(t, store, Config{})
	all := func(string) bool { return true }
	commit := func(pid int64, offs ...state.GroupOffset) {
		t.Helper()
		if err := c.CommitPending("g", pid, 0, offs); err != nil {
			t.Fatalf("CommitPending of producer %d: %v", pid, err)
		}
	}
	commit(7, state.GroupOffset{Topic: "in", Partition: 0, Offset: 5, LeaderEpoch: -1})
	commit(7, state.GroupOffset{Topic: "in", Partition: 0, Offset: 6, LeaderEpoch: -1}) // replaces 5
	commit(8, state.GroupOffset{Topic: "in", Partition: 1, Offset: 9, LeaderEpoch: -1})
	if store.pendingWrites != 3 {
		t.Fatalf("%d pending writes reached the store, want 3", store.pendingWrites)
	}
	wantFetched(t, fetchAll(t, c, "g"))
	if p := c.PendingPartitions("g"); len(p) != 2 || !p[state.TxnPartition{Topic: "in", Partition: 0}] {
		t.Fatalf("pending partitions %v", p)
	}

	if err := c.CompleteTxn(func(g string) bool { return g != "g" }, 7, true); err != nil {
		t.Fatal(err)
	}
	wantFetched(t, fetchAll(t, c, "g")) // a marker of another partition's groups
	if err := c.CompleteTxn(all, 7, true); err != nil {
		t.Fatal(err)
	}
	wantFetched(t, fetchAll(t, c, "g"), `in/0=6 e-1 ""`)
	if o := store.offsets["g"][topicPartition{"in", 0}]; o.Offset != 6 {
		t.Fatalf("the store's copy after the commit: %+v", o)
	}
	if err := c.CompleteTxn(all, 8, false); err != nil {
		t.Fatal(err)
	}
	wantFetched(t, fetchAll(t, c, "g"), `in/0=6 e-1 ""`)
	if p := c.PendingPartitions("g"); len(p) != 0 {
		t.Fatalf("pending after both markers: %v", p)
	}

	store.failCommits = errors.New("injected")
	if err := c.CommitPending("g", 9, 0, []state.GroupOffset{{Topic: "in", Offset: 1}}); err != kerr.CoordinatorNotAvailable {
		t.Fatalf("CommitPending with a failing store: %v, want COORDINATOR_NOT_AVAILABLE", err)
	}
	if p := c.PendingPartitions("g"); len(p) != 0 {
		t.Fatalf("a failed write left pending offsets: %v", p)
	}
}

// A partition's log replays its transactions: offsets of a transactional
// batch are pending for the producer until its marker commits them (a
// later plain commit of the partition wins over them) or aborts them;
// without a marker they stay pending, and Load hands them to the group.
func TestOffsetsLogReplaysTransactions(t *testing.T) {
	t.Parallel()
	o := func(p int32, off int64) state.GroupOffset {
		return state.GroupOffset{Topic: "in", Partition: p, Offset: off, LeaderEpoch: -1, CommitTimestamp: 1}
	}
	var log []byte
	log = batch.AppendTxnRecords(log, 1, 7, 0, TxnOffsetRecords("g", []state.GroupOffset{o(0, 10), o(1, 11)}))
	log = batch.AppendTxnRecords(log, 1, 8, 0, TxnOffsetRecords("g", []state.GroupOffset{o(2, 20)}))
	log = batch.AppendTxnRecords(log, 1, 9, 0, TxnOffsetRecords("g", []state.GroupOffset{o(3, 30)}))
	log = batch.AppendTxnMarker(log, batch.TxnMarker{ProducerID: 7, Commit: true})
	log = batch.AppendRecords(log, 1, []batch.Record{OffsetRecord("g", o(1, 12))})
	log = batch.AppendTxnMarker(log, batch.TxnMarker{ProducerID: 8})
	st := NewGroupsState()
	it := batch.NewIterator(log)
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		if err := st.ApplyBatch(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	got := st.Offsets["g"]
	if len(got) != 2 || got[topicPartition{"in", 0}].Offset != 10 || got[topicPartition{"in", 1}].Offset != 12 {
		t.Fatalf("committed offsets %+v", got)
	}
	if len(st.Pending) != 1 || len(st.Pending[9]["g"]) != 1 {
		t.Fatalf("pending %+v, want producer 9's one offset", st.Pending)
	}

	c := newCoordinator(t, nil, Config{})
	c.Load(func(string) bool { return true }, st)
	wantFetched(t, fetchAll(t, c, "g"), `in/0=10 e-1 ""`, `in/1=12 e-1 ""`)
	if p := c.PendingPartitions("g"); len(p) != 1 || !p[state.TxnPartition{Topic: "in", Partition: 3}] {
		t.Fatalf("pending after the load: %v", p)
	}
	if err := c.CompleteTxn(func(string) bool { return true }, 9, true); err != nil {
		t.Fatal(err)
	}
	wantFetched(t, fetchAll(t, c, "g"), `in/0=10 e-1 ""`, `in/1=12 e-1 ""`, `in/3=30 e-1 ""`)
}
