package control

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// A failed-over partition becomes STOPPED, and its topic writable, only
// once its in-sync replicas hold the failover's markers: a new leader
// elected from them then has the MIRROR_PID_RESET too (issue 22). Here
// the partition's ISR names a follower that never fetches: the stop
// waits, answers that the markers are not replicated, and leaves the
// partition STOPPING. Once the ISR shrinks to the leader, the drive
// finishes the stop without appending a second MIRROR_PID_RESET.
// Not parallel: it shortens markersCommitWait.
func TestStopWaitsForTheISRToHoldTheMarkers(t *testing.T) {
	defer func(d time.Duration) { markersCommitWait = d }(markersCommitWait)
	markersCommitWait = 300 * time.Millisecond
	f := newSyncFixture(t, "t")
	f.produce(t, "t", 0, 3)
	f.n.startTopics(t, f.ctx, "t")
	f.waitMirrored(t, "t", 0, 3)

	p := f.n.b.Partitions().Topic("t").Partition(0)
	self := f.n.b.NodeID()
	p.SetAssignment(self, partition.Assignment{Leader: self, Replicas: []int32{self, 2}, ISR: []int32{self, 2}})

	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "m"
	stop.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "t"}}
	resp, err := f.n.cl.Request(f.ctx, stop)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*mirrorapi.StopMirrorTopicsResponse)
	if len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.UnknownServerError.Code || r.Topics[0].ErrorMessage == nil ||
		!strings.Contains(*r.Topics[0].ErrorMessage, "in-sync replicas did not hold the failover markers") {
		t.Fatalf("a stop whose markers the ISR does not hold answered %+v", r.Topics)
	}
	if st := f.state(t, "t", 0); st.State != state.StateStopping {
		t.Fatalf("state %v with the markers not replicated, want STOPPING", st.State)
	}
	if info, _ := f.n.b.Partitions().Info("t"); info.Mirror != "m" {
		t.Fatalf("topic released (mirror %q) before its markers were replicated", info.Mirror)
	}
	end := p.LogEndOffset()
	if end != 4 || p.HighWatermark() != 3 {
		t.Fatalf("log end %d, high watermark %d: want the 3 mirrored records and one MIRROR_PID_RESET, uncommitted",
			end, p.HighWatermark())
	}

	// The controller takes the follower out of the ISR: the high
	// watermark covers the markers, and the drive finishes the stop.
	p.SetAssignment(self, partition.Assignment{Leader: self, PartitionEpoch: 1, Replicas: []int32{self, 2}, ISR: []int32{self}})
	f.n.ctl.drive()
	if st := f.state(t, "t", 0); st.State != state.StateStopped {
		t.Fatalf("state %v once the ISR holds the markers, want STOPPED", st.State)
	}
	if got := p.LogEndOffset(); got != end {
		t.Fatalf("log end %d after the drive finished the stop, was %d: the markers were appended again", got, end)
	}
	if info, _ := f.n.b.Partitions().Info("t"); info.Mirror != "" {
		t.Fatalf("topic still belongs to mirror %q once STOPPED", info.Mirror)
	}
}

// A Stop answers within stopWait of its arrival, whatever its final sync
// and its own markers took: awaitStops waits for the partitions other
// nodes lead only until that deadline, then names those still STOPPING.
func TestAwaitStopsEndsAtTheStopsDeadline(t *testing.T) {
	t.Parallel()
	var logs testutil.SyncBuffer
	f := newSyncFixtureWith(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, "t")
	f.n.startTopics(t, f.ctx, "t")
	// Marked as being stopped, so that no drive fails it over meanwhile:
	// it stands for a partition another node leads.
	unlock := f.n.ctl.lockMirror("m")
	f.n.ctl.ctl("m").stopping["t"] = true
	unlock()
	st := f.state(t, "t", 0)
	st.State = state.StateStopping
	if err := f.n.b.Store().PutMirrorPartitionStates([]state.MirrorPartitionState{st}); err != nil {
		t.Fatal(err)
	}
	resp := mirrorapi.NewPtrStopMirrorTopicsRequest().ResponseKind().(*mirrorapi.StopMirrorTopicsResponse)
	resp.Topics = []mirrorapi.MirrorTopicsResponseTopic{{Name: "t",
		Partitions: []mirrorapi.StopMirrorTopicsResponsePartition{{PartitionIndex: 0, Lag: -1}}}}
	began := time.Now()
	f.n.ctl.awaitStops("m", resp, began.Add(-time.Second)) // the Stop's final sync used up its time
	if waited := time.Since(began); waited > 2*time.Second {
		t.Fatalf("awaitStops waited %v past the Stop's deadline", waited)
	}
	if rt := resp.Topics[0]; rt.ErrorCode != kerr.RequestTimedOut.Code || rt.ErrorMessage == nil ||
		!strings.Contains(*rt.ErrorMessage, "partitions [0] of t are still STOPPING") {
		t.Fatalf("answer %+v, want REQUEST_TIMED_OUT naming partition 0", rt)
	}
	// Logged as what it is: not stopped yet, its leaders go on.
	f.n.ctl.logStops("m", resp)
	if out := logs.String(); !strings.Contains(out, "topic stop answered before every partition was STOPPED") ||
		strings.Contains(out, "topic stopped") {
		t.Fatalf("log:\n%s", out)
	}
}
