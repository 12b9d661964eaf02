package group

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func alterShareOffsets(c *Coordinator, group, topic string, offsets map[int32]int64) *kmsg.AlterShareGroupOffsetsResponse {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(16) {
		if o, ok := offsets[p]; ok {
			rt.Partitions = append(rt.Partitions, kmsg.AlterShareGroupOffsetsRequestTopicPartition{Partition: p, StartOffset: o})
		}
	}
	req.Topics = append(req.Topics, rt)
	return c.AlterShareGroupOffsets(req)
}

// describeShareOffsets is the group's start offsets as "topic/p=offset"
// (every partition with one), or its error.
func describeShareOffsets(c *Coordinator, group string) string {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Version = 1
	req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: group}}
	g := c.DescribeShareGroupOffsets(req).Groups[0]
	if g.ErrorCode != 0 {
		return errName(g.ErrorCode)
	}
	var out []string
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d=%d", t.Topic, p.Partition, p.StartOffset))
		}
	}
	return fmt.Sprint(out)
}

// The start offsets of a share group: set on a group that does not exist
// yet (it becomes an empty share group), described, kept across a
// coordinator move, refused while the group has members or for a group
// of another kind, and deleted by topic and with the group.
func TestShareGroupStartOffsets(t *testing.T) {
	t.Parallel()
	c, store, tt := newShareCoordinator(t, Config{})
	resp := alterShareOffsets(c, "sg", "orders", map[int32]int64{0: 5, 2: 9})
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].TopicID != topicID(1) ||
		resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[0].Partitions[1].ErrorCode != 0 {
		t.Fatalf("alter: %+v", resp)
	}
	if got := describeShareOffsets(c, "sg"); got != "[orders/0=5 orders/2=9]" {
		t.Fatalf("described %s", got)
	}
	if g := describeShare(t, c, "sg"); g.ErrorCode != 0 || g.GroupState != "Empty" {
		t.Fatalf("the group the alter made: %+v", g)
	}
	// Asked by partition: one without a start offset is -1, a partition
	// that does not exist is UNKNOWN_TOPIC_OR_PARTITION.
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "sg",
		Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "orders", Partitions: []int32{1, 2, 7}}}}}
	ps := c.DescribeShareGroupOffsets(req).Groups[0].Topics[0].Partitions
	if ps[0].StartOffset != -1 || ps[1].StartOffset != 9 || ps[2].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("described by partition: %+v", ps)
	}
	bad := alterShareOffsets(c, "sg", "orders", map[int32]int64{1: -3, 9: 1})
	wantCode(t, "a negative start offset", bad.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequest)
	wantCode(t, "a partition that does not exist", bad.Topics[0].Partitions[1].ErrorCode, kerr.UnknownTopicOrPartition)
	wantCode(t, "an unknown topic", alterShareOffsets(c, "sg", "nope", map[int32]int64{0: 1}).Topics[0].Partitions[0].ErrorCode,
		kerr.UnknownTopicOrPartition)

	c2 := newCoordinator(t, store, Config{ShareProtocol: true, Topics: tt.all})
	c2.Load(func(string) bool { return true }, store.replay(t))
	if got := describeShareOffsets(c2, "sg"); got != "[orders/0=5 orders/2=9]" {
		t.Fatalf("after the load: %s", got)
	}
	m := newShareMember(t, c2, "sg", "m1", "orders")
	m.join()
	wantCode(t, "an alter while the group has a member", alterShareOffsets(c2, "sg", "orders", map[int32]int64{0: 1}).ErrorCode,
		kerr.NonEmptyGroup)
	m.send(leaveEpoch, nil)
	form(t, newClient(t, c2, "classic", "c"))
	wantCode(t, "an alter of a classic group", alterShareOffsets(c2, "classic", "orders", map[int32]int64{0: 1}).ErrorCode,
		kerr.GroupIDNotFound)
	if got := describeShareOffsets(c2, "classic"); got != errName(kerr.GroupIDNotFound.Code) {
		t.Fatalf("described a classic group: %s", got)
	}

	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID, del.Topics = "sg", []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "orders"}}
	if resp := c2.DeleteShareGroupOffsets(del); resp.ErrorCode != 0 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %+v", resp)
	}
	if got := describeShareOffsets(c2, "sg"); got != "[]" {
		t.Fatalf("after the delete: %s", got)
	}
	alterShareOffsets(c2, "sg", "orders", map[int32]int64{3: 4})
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"sg"}
	wantCode(t, "deleting the share group", c2.DeleteGroups(dg).Groups[0].ErrorCode, nil)
	if st := store.replay(t); len(st.ShareOffsets["sg"]) != 0 || st.Share["sg"] != nil {
		t.Fatalf("after the group's delete the log holds %+v, %+v", st.ShareOffsets["sg"], st.Share["sg"])
	}
}

// A recreated topic (a new id) starts with no start offset: the one set
// for the old topic is not the new one's.
func TestShareGroupStartOffsetsFollowTheTopicID(t *testing.T) {
	t.Parallel()
	c, _, tt := newShareCoordinator(t, Config{})
	alterShareOffsets(c, "sg", "orders", map[int32]int64{0: 5})
	tt.mu.Lock()
	tt.topics[0].ID = topicID(9)
	tt.mu.Unlock()
	if got := describeShareOffsets(c, "sg"); got != "[]" {
		t.Fatalf("after the topic was recreated: %s", got)
	}
}

// An operation refused for a failed write leaves nothing queued: its
// records never reach the log with a later write (found in review: a
// refused alter came back after a reload, a refused delete deleted the
// group at the next write).
func TestShareGroupRefusedWritesStayRefused(t *testing.T) {
	t.Parallel()
	c, store, tt := newShareCoordinator(t, Config{})
	alterShareOffsets(c, "sg", "orders", map[int32]int64{0: 5})
	store.failAppends = kerr.NotCoordinator
	wantCode(t, "an alter whose write fails", alterShareOffsets(c, "sg", "orders", map[int32]int64{1: 77}).ErrorCode,
		kerr.NotCoordinator)
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"sg"}
	wantCode(t, "a delete whose write fails", c.DeleteGroups(dg).Groups[0].ErrorCode, kerr.NotCoordinator)
	wantCode(t, "an alter creating a group, whose write fails", alterShareOffsets(c, "new", "orders", map[int32]int64{0: 1}).ErrorCode,
		kerr.NotCoordinator)
	if g := c.group("new", false); g != nil {
		t.Fatal("a group the refused alter would have made is left behind (listed as an empty classic group)")
	}
	if err := c.TxnCommitCheck("sg", "", nil, -1); err != kerr.GroupIDNotFound {
		t.Fatalf("a txn commit into a share group: %v", err)
	}
	store.failAppends = nil
	alterShareOffsets(c, "sg", "orders", map[int32]int64{2: 9})
	c2 := newCoordinator(t, store, Config{ShareProtocol: true, Topics: tt.all})
	c2.Load(func(string) bool { return true }, store.replay(t))
	if got := describeShareOffsets(c2, "sg"); got != "[orders/0=5 orders/2=9]" {
		t.Fatalf("after a reload: %s, want what was answered as set", got)
	}
}
