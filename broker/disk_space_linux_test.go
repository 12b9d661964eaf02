package broker

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
)

// TestFullDiskKeepsTheNode (issue 17 item 1): on a small real filesystem
// holding the log dir and the state store, producers fill the disk. The
// node used to die with SIGBUS in Badger's memory-mapped write-ahead log at
// the next offset commit. Now produce is refused (KAFKA_STORAGE_ERROR with
// a message) while the state store's reserve is still free; offset commits
// go on in the margin above it; state writes the disk cannot hold are
// refused with an error code (and a message where the API has one);
// deleting a topic frees space and everything resumes without a restart;
// every acknowledged write survives a restart.
func TestFullDiskKeepsTheNode(t *testing.T) {
	t.Parallel()
	dir := testutil.Tmpfs(t, 160<<20)
	cfg := DefaultConfig()
	cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
	cfg.LogDirs = []string{dir}
	cfg.MetricsListener = ""
	cfg.Log.SegmentBytes = 8 << 20
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { b.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := adminClient(t, b)

	mustTopic(t, b, "keep", 1)
	fill := mustTopic(t, b, "fill", 1)
	rc := dialRaw(t, b)
	// __consumer_offsets exists before the disk fills, as on any node
	// that has served a group: its 50 partitions' files would otherwise
	// be created within the margin the test measures.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "reader"
	if r := rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	acked := 0
	var refusal string
	for i := 0; refusal == "" && i < 400; i++ {
		sp := onlyPartition(t, rc.roundTrip(produceReq(9, -1, fill, 0, plainBatch(8, 64<<10))).(*kmsg.ProduceResponse))
		switch {
		case sp.ErrorCode == 0:
			acked++
		case sp.ErrorCode == kerr.KafkaStorageError.Code && sp.ErrorMessage != nil:
			refusal = *sp.ErrorMessage
		default:
			t.Fatalf("produce %d: %v %v", i, kerr.ErrorForCode(sp.ErrorCode), sp.ErrorMessage)
		}
	}
	if acked == 0 || !strings.Contains(refusal, "kept free") || !strings.Contains(refusal, "state store") {
		t.Fatalf("after %d acknowledged produces the refusal was %q, want one naming the state store's reserve", acked, refusal)
	}

	// Offset commits go raw: kadm would retry COORDINATOR_NOT_AVAILABLE
	// until its context ends.
	commit := func(group string, offset int64) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "keep"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset, rp.LeaderEpoch = offset, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rc.roundTrip(req).(*kmsg.OffsetCommitResponse)
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	// The margin above the reserve: consumers still commit.
	for i := range 20 {
		if err := commit("reader", int64(i)); err != nil {
			t.Fatalf("offset commit %d with produce refused: %v", i, err)
		}
	}

	// Another program takes the rest: every state write is refused, none
	// kills the node.
	filler := testutil.FillDisk(t, dir, 0)
	defer os.Remove(filler) // before Close, should the test fail here
	for i := range 10 {
		if err := commit("reader", 100+int64(i)); !errors.Is(err, kerr.CoordinatorNotAvailable) {
			t.Fatalf("offset commit %d on a full disk: %v, want COORDINATOR_NOT_AVAILABLE", i, err)
		}
	}
	resp, err := adm.CreateTopics(ctx, 1, 1, nil, "new")
	if err != nil {
		t.Fatal(err)
	}
	if r := resp["new"]; !errors.Is(r.Err, kerr.KafkaStorageError) || !strings.Contains(r.ErrMessage, "no space") {
		t.Fatalf("CreateTopics on a full disk: %v %q", r.Err, r.ErrMessage)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}

	// Deleting the topic frees its logs; writes resume by themselves.
	dresp, err := adm.DeleteTopics(ctx, "fill")
	if err != nil || dresp["fill"].Err != nil {
		t.Fatalf("deleting a topic on a full disk: %v %v", err, dresp["fill"].Err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "after"); err != nil {
		t.Fatalf("CreateTopics once space is back: %v", err)
	}
	after := b.partitions.Topic("after")
	if sp := onlyPartition(t, rc.roundTrip(produceReq(9, -1, after, 0, plainBatch(1, 100))).(*kmsg.ProduceResponse)); sp.ErrorCode != 0 {
		t.Fatalf("produce once space is back: %v %v", kerr.ErrorForCode(sp.ErrorCode), msgOf(sp.ErrorMessage))
	}
	if err := commit("reader-after", 1); err != nil {
		t.Fatalf("offset commit once space is back: %v", err)
	}

	cl.Close()
	b.Close()
	b, err = New(cfg)
	if err != nil {
		t.Fatalf("restarting: %v", err)
	}
	_, adm = adminClient(t, b)
	for group, want := range map[string]int64{"reader": 19, "reader-after": 1} {
		fetched, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := fetched.Lookup("keep", 0); !ok || o.At != want {
			t.Fatalf("group %s after restart: %+v, want %d", group, o, want)
		}
	}
	if end, err := adm.ListEndOffsets(ctx, "after"); err != nil || end["after"][0].Offset != 1 {
		t.Fatalf("topic after restart: %v %v", end, err)
	}
}

// msgOf is an optional error message, for a test's failure.
func msgOf(m *string) string {
	if m == nil {
		return "(no message)"
	}
	return *m
}
