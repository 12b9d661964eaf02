package txn

import (
	"testing"

	"github.com/kmirror/kmirror/state"
)

// Resolve tells maintenance what to do with a transaction a partition
// holds open: leave the coordinator's own running ones, redo the decided
// ones whose marker is missing, abort those of fenced epochs, and report
// producer ids no transactional id owns.
func TestResolve(t *testing.T) {
	t.Parallel()
	p := state.TxnPartition{Topic: "t", Partition: 0}
	other := state.TxnPartition{Topic: "t", Partition: 1}
	e := newEnv(t,
		state.Txn{ID: "running", ProducerID: 10, Epoch: 3, LastProducerID: -1, LastEpoch: -1, TimeoutMs: 60_000,
			State: int8(Ongoing), StartMs: 1_700_000_000_000, Partitions: []state.TxnPartition{p}},
		state.Txn{ID: "committed", ProducerID: 20, Epoch: 5, LastProducerID: 19, LastEpoch: 7, TimeoutMs: 60_000,
			State: int8(CompleteCommit)},
		state.Txn{ID: "aborted", ProducerID: 30, Epoch: 1, LastProducerID: -1, LastEpoch: -1, TimeoutMs: 60_000,
			State: int8(CompleteAbort)},
	)
	for _, tc := range []struct {
		name  string
		p     state.TxnPartition
		pid   int64
		epoch int16
		want  Resolution
	}{
		{"running, partition added", p, 10, 3, Keep},
		{"running, partition never added", other, 10, 3, Abort},
		{"running id, older epoch", p, 10, 2, Abort},
		{"decided commit, marker missing", p, 20, 5, Commit},
		{"previous producer id of an id", p, 19, 7, Abort},
		{"decided abort", p, 30, 1, Abort},
		{"newer epoch than the coordinator's", p, 30, 9, Unknown},
		{"no id owns the producer", p, 99, 0, Unknown},
	} {
		if got := e.c.Resolve(tc.p, tc.pid, tc.epoch); got != tc.want {
			t.Errorf("%s: Resolve = %d, want %d", tc.name, got, tc.want)
		}
	}
}
