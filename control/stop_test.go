package control

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

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
