package broker

import (
	"testing"

	"github.com/kmirror/kmirror/mirrorapi"
)

// describeRow is a Describe row of partition p, reported by node by (-1:
// from the metadata log) with source offset src.
func describeRow(p int32, by int32, src int64) mirrorapi.DescribeClusterMirrorsResponsePartition {
	r := mirrorapi.NewDescribeClusterMirrorsResponsePartition()
	r.PartitionIndex, r.ReportedBy, r.SourceOffset, r.StateValue = p, by, src, "MIRRORING"
	if by >= 0 {
		r.LagMillis = 7
	}
	return r
}

// describeAnswer is a Describe answer for mirror "dr", topic "t", with
// rows and the mirror's last group sync.
func describeAnswer(synced int64, noTopicIDs bool, rows ...mirrorapi.DescribeClusterMirrorsResponsePartition) *mirrorapi.DescribeClusterMirrorsResponse {
	m := mirrorapi.NewDescribeClusterMirrorsResponseMirror()
	m.MirrorName, m.LastGroupSyncMillis = "dr", synced
	m.Topics = []mirrorapi.DescribeClusterMirrorsResponseTopic{{TopicName: "t", Partitions: rows, NoSourceTopicIDs: noTopicIDs}}
	return &mirrorapi.DescribeClusterMirrorsResponse{Mirrors: []mirrorapi.DescribeClusterMirrorsResponseMirror{m}}
}

// A node's Describe answer takes each partition's row from its leader, as
// this node sees the leaders; a row no leader answered for stays this
// node's (ReportedBy -1), and so does one whose leader moved: a row is
// taken only from the node this node names as the partition's leader.
func TestMergeLeaderRows(t *testing.T) {
	t.Parallel()
	// Node 1 answers; it leads partition 0. Node 2 leads 1 and 2, node 3
	// leads 3 (down: no answer), node 2 is the controller; partition 4
	// moved from node 2 to node 3 after node 2 answered, and partition 5
	// is led by node 2 in this node's view but node 2 no longer claims it.
	leaders := map[int32]int32{0: 1, 1: 2, 2: 2, 3: 3, 4: 3, 5: 2}
	resp := describeAnswer(0, false, describeRow(0, 1, 100), describeRow(1, -1, 10), describeRow(2, -1, 20),
		describeRow(3, -1, 30), describeRow(4, -1, 40), describeRow(5, -1, 50))
	answers := map[int32]*mirrorapi.DescribeClusterMirrorsResponse{
		2: describeAnswer(1234, true, describeRow(1, 2, 11), describeRow(2, 2, 21), describeRow(4, 2, 41)),
	}
	mergeLeaderRows(resp, answers, func(topic string, p int32) int32 {
		if topic != "t" {
			t.Fatalf("leader of %s asked", topic)
		}
		return leaders[p]
	}, 2)
	want := []struct {
		by  int32
		src int64
	}{{1, 100}, {2, 11}, {2, 21}, {-1, 30}, {-1, 40}, {-1, 50}}
	m := resp.Mirrors[0]
	for i, p := range m.Topics[0].Partitions {
		if p.ReportedBy != want[i].by || p.SourceOffset != want[i].src {
			t.Errorf("partition %d: reported by %d with source offset %d, want %d and %d", p.PartitionIndex, p.ReportedBy,
				p.SourceOffset, want[i].by, want[i].src)
		}
	}
	if m.LastGroupSyncMillis != 1234 {
		t.Errorf("LastGroupSyncMillis %d, want the controller's 1234", m.LastGroupSyncMillis)
	}
	if !m.Topics[0].NoSourceTopicIDs {
		t.Error("NoSourceTopicIDs from a leader's answer was lost")
	}

	// Without the controller's answer, this node's own value stays.
	resp = describeAnswer(99, false, describeRow(0, -1, 1))
	mergeLeaderRows(resp, nil, func(string, int32) int32 { return 2 }, 2)
	if got := resp.Mirrors[0]; got.LastGroupSyncMillis != 99 || got.Topics[0].Partitions[0].ReportedBy != -1 {
		t.Errorf("with no answers the row changed: %+v", got)
	}
}
