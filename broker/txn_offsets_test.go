package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Offsets committed in a transaction are pending in the group's partition
// of __consumer_offsets: the group does not serve them (RequireStable
// answers UNSTABLE_OFFSET_COMMIT), a restarted node replays them as still
// pending, and the transaction's commit after the restart makes them the
// group's.
func TestTxnOffsetsPendingAcrossARestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	b := newTestBroker(t, groupLogConfig(dir))
	cl := newTestClient(t, b)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "data"); err != nil {
		t.Fatal(err)
	}
	if co := adm.FindGroupCoordinators(ctx, "g")["g"]; co.Err != nil { // creates __consumer_offsets
		t.Fatal(co.Err)
	}
	// retry sends req until its error code (code reads it) is not a
	// coordinator's passing one.
	retry := func(req kmsg.Request, code func(kmsg.Response) int16) kmsg.Response {
		t.Helper()
		for {
			resp, err := cl.Request(ctx, req)
			if err != nil {
				t.Fatalf("%T: %v", req, err)
			}
			switch c := code(resp); c {
			case kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.ConcurrentTransactions.Code,
				kerr.NotCoordinator.Code:
				time.Sleep(50 * time.Millisecond)
			case 0:
				return resp
			default:
				t.Fatalf("%T: %v", req, kerr.ErrorForCode(c))
			}
		}
	}
	init := kmsg.NewPtrInitProducerIDRequest()
	id := "etl"
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60_000
	ir := retry(init, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }).(*kmsg.InitProducerIDResponse)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, ir.ProducerID, ir.ProducerEpoch, "g"
	retry(add, func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode })
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = id, "g", ir.ProducerID, ir.ProducerEpoch
	commit.Generation = -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "data"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, 7, -1
	rt.Partitions = append(rt.Partitions, rp)
	commit.Topics = append(commit.Topics, rt)
	retry(commit, func(r kmsg.Response) int16 {
		return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	})

	stable := func() int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group, req.RequireStable = 7, "g", true
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "data", []int32{0}
		req.Topics = append(req.Topics, ft)
		resp := retry(req, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).ErrorCode }).(*kmsg.OffsetFetchResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if got := fetchOffset(ctx, t, adm, "g", "data", 0); got != -1 {
		t.Fatalf("an undecided transaction's offset is served: %d", got)
	}
	if code := stable(); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("RequireStable with the offset pending: %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
	}

	b.Close()
	b = newTestBroker(t, groupLogConfig(dir))
	cl = newTestClient(t, b)
	adm = kadm.NewClient(cl)
	if code := stable(); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("RequireStable after the restart: %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, ir.ProducerID, ir.ProducerEpoch, true
	retry(end, func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode })
	if got := fetchOffset(ctx, t, adm, "g", "data", 0); got != 7 {
		t.Fatalf("after the commit: offset %d, want 7", got)
	}
	if code := stable(); code != 0 {
		t.Fatalf("RequireStable after the commit: %v", kerr.ErrorForCode(code))
	}
}
