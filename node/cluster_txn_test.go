package node

import (
	"testing"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil/eostest"
)

// A consume-transform-produce loop keeps exactly-once on a cluster, with
// its transactional id coordinated by one node and its group by another:
// the transaction coordinator writes its markers at every partition's
// leader (WriteTxnMarkers to the other nodes), and the group's
// coordinator holds the offsets committed in each transaction pending in
// __consumer_offsets until the marker there decides them.
//   - The group's coordinator stops while a transaction is open: the
//     partition's new leader replays the group's offsets and goes on.
//   - The transaction coordinator stops in the middle of a transaction:
//     the id's partition of __transaction_state has a new leader, which
//     loads the open transaction; the next producer of the id aborts it
//     there and goes on.
//
// Every input record is in the read_committed output once, none twice,
// and the group's offsets end at the input's end.
// (cmd/kmirror's TestServeClusterKill9TransactionCoordinator kills the
// node for real.)
func TestClusterExactlyOnceAcrossNodes(t *testing.T) {
	t.Parallel()
	for _, stop := range []string{"group coordinator", "transaction coordinator"} {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) { cfg.GroupInitialRebalanceDelay = 0 })
			ctx := t.Context()
			for _, topic := range []string{"in", "out"} {
				if _, err := c.client(0).CreateTopic(ctx, 3, 3, nil, topic); err != nil {
					t.Fatal(err)
				}
			}
			live := c.addrs
			const n = 300
			loop := eostest.New("", "etl")
			loop.Produce(ctx, t, live(), n)
			groupNode, txnID, txnNode := eostest.Coordinators(ctx, t, live(), "etl", "etl")
			loop.TxnID = txnID
			stopped := groupNode
			if stop == "transaction coordinator" {
				stopped = txnNode
			}
			loop.Run(ctx, t, live(), n, n/3, func() { c.stop(int(stopped - 1)) })
			if len(loop.Seen) >= n {
				t.Fatalf("the first session read everything (%d) before the stop", len(loop.Seen))
			}
			loop.Run(ctx, t, live(), n, 0, nil)
			loop.Check(ctx, t, live(), n)
		})
	}
}
