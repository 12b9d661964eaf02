package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/group"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// groupLogConfig is a broker config on dir, reused across restarts.
func groupLogConfig(dir string) func(*Config) {
	return func(c *Config) {
		c.LogDirs = []string{dir}
		c.GroupInitialRebalanceDelay = 0
	}
}

// openGroupLogStore opens the state store of a stopped broker on dir.
func openGroupLogStore(t *testing.T, dir string) *state.Store {
	t.Helper()
	cfg := DefaultConfig()
	groupLogConfig(dir)(&cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, err := OpenStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// wipeBadgerGroups deletes every group from the node's Badger store, so
// that only __consumer_offsets can bring them back.
func wipeBadgerGroups(t *testing.T, dir string) {
	t.Helper()
	st := openGroupLogStore(t, dir)
	defer st.Close()
	metas, err := st.Groups()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metas {
		if err := st.DeleteGroup(m.Group); err != nil {
			t.Fatal(err)
		}
	}
}

func fetchOffset(ctx context.Context, t *testing.T, adm *kadm.Client, grp, topic string, p int32) int64 {
	t.Helper()
	for {
		offs, err := adm.FetchOffsets(ctx, grp)
		if err == nil {
			if o, ok := offs.Lookup(topic, p); ok && o.Err == nil {
				return o.At
			}
			return -1
		}
		if ctx.Err() != nil {
			t.Fatalf("fetching the offsets of %s: %v", grp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A group's committed offsets are records in its partition of
// __consumer_offsets, which the first FindCoordinator creates as Kafka
// does (50 partitions, compacted, internal), and a restarted node serves
// them from the log even when its Badger copy is gone.
func TestGroupOffsetsLiveInConsumerOffsets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	b := newTestBroker(t, groupLogConfig(dir))
	cl := newTestClient(t, b)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "data"); err != nil {
		t.Fatal(err)
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "data", Partition: 1, At: 42, LeaderEpoch: -1, Metadata: "m"})
	if resp, err := adm.CommitOffsets(ctx, "g1", os); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	checkInternalTopic(ctx, t, cl, meta.GroupTopic, DefaultOffsetsTopicPartitions)
	rc, err := adm.DescribeTopicConfigs(ctx, meta.GroupTopic)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rc.On(meta.GroupTopic, nil); err != nil || !hasConfig(v, "cleanup.policy", "compact") {
		t.Fatalf("configs of __consumer_offsets: %v %+v", err, v)
	}

	// The record is Kafka's, in the group's partition.
	part := int32(meta.CoordinatorPartition("g1", DefaultOffsetsTopicPartitions))
	rd := newTestClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		meta.GroupTopic: {part: kgo.NewOffset().AtStart()}}))
	var st *group.GroupsState
	for st == nil || len(st.Offsets["g1"]) == 0 {
		fs := rd.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading __consumer_offsets: %v", err)
		}
		if st == nil {
			st = group.NewGroupsState()
		}
		fs.EachRecord(func(r *kgo.Record) {
			if err := st.Apply(r.Key, r.Value); err != nil {
				t.Errorf("record at %d: %v", r.Offset, err)
			}
		})
	}
	for _, o := range st.Offsets["g1"] {
		if o.Topic != "data" || o.Partition != 1 || o.Offset != 42 || o.Metadata != "m" {
			t.Fatalf("the record says %+v", o)
		}
	}

	b.Close()
	wipeBadgerGroups(t, dir)
	b = newTestBroker(t, groupLogConfig(dir))
	adm = kadm.NewClient(newTestClient(t, b))
	if got := fetchOffset(ctx, t, adm, "g1", "data", 1); got != 42 {
		t.Fatalf("after a restart without the Badger copy: offset %d, want 42", got)
	}
}

// checkInternalTopic fails the test unless Metadata lists name, marked
// internal, with partitions partitions.
func checkInternalTopic(ctx context.Context, t *testing.T, cl *kgo.Client, name string, partitions int) {
	t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata: %v %+v", err, mresp)
	}
	if mt := mresp.Topics[0]; mt.ErrorCode != 0 || !mt.IsInternal || len(mt.Partitions) != partitions {
		t.Fatalf("%s: error %d internal %v partitions %d, want %d", name, mt.ErrorCode, mt.IsInternal, len(mt.Partitions), partitions)
	}
}

func hasConfig(rc kadm.ResourceConfig, name, value string) bool {
	for _, c := range rc.Configs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// A node upgraded in place keeps the groups it held in Badger alone: the
// first load of their partitions writes them into __consumer_offsets.
func TestGroupOffsetsMoveFromBadgerIntoTheLog(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	b := newTestBroker(t, groupLogConfig(dir))
	if _, err := kadm.NewClient(newTestClient(t, b)).CreateTopic(ctx, 1, 1, nil, "data"); err != nil {
		t.Fatal(err)
	}
	b.Close()
	st := openGroupLogStore(t, dir)
	err := st.PutGroupMeta(state.GroupMeta{Group: "old", ProtocolType: "consumer", Generation: 7})
	if err == nil {
		err = st.CommitOffsets("old", []state.GroupOffset{{Topic: "data", Partition: 0, Offset: 9, LeaderEpoch: -1, CommitTimestamp: 1}})
	}
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	b = newTestBroker(t, groupLogConfig(dir))
	adm := kadm.NewClient(newTestClient(t, b))
	if got := fetchOffset(ctx, t, adm, "old", "data", 0); got != 9 {
		t.Fatalf("the Badger group's offset %d, want 9", got)
	}
	b.Close()
	wipeBadgerGroups(t, dir)
	b = newTestBroker(t, groupLogConfig(dir))
	adm = kadm.NewClient(newTestClient(t, b))
	if got := fetchOffset(ctx, t, adm, "old", "data", 0); got != 9 {
		t.Fatalf("the moved group's offset from the log alone: %d, want 9", got)
	}
	groups, err := adm.DescribeGroups(ctx, "old")
	if err != nil || groups["old"].ProtocolType != "consumer" {
		t.Fatalf("the moved group: %v %+v", err, groups["old"])
	}
}

// brokerWithCommits starts a broker with topic "data" (one partition)
// and commits offset at for each group, creating __consumer_offsets.
func brokerWithCommits(ctx context.Context, t *testing.T, at int64, groups ...string) (*Broker, *kadm.Client) {
	t.Helper()
	b := newTestBroker(t, groupLogConfig(t.TempDir()))
	adm := kadm.NewClient(newTestClient(t, b))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "data"); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "data", Partition: 0, At: at, LeaderEpoch: -1})
	for _, g := range groups {
		if resp, err := adm.CommitOffsets(ctx, g, offs); err != nil || resp.Error() != nil {
			t.Fatalf("commit %s: %v %v", g, err, resp.Error())
		}
	}
	return b, adm
}

// Deleting __consumer_offsets drops its groups here: the node leads none
// of its partitions any more.
func TestDeletedOffsetsTopicUnloadsItsGroups(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, _ := brokerWithCommits(ctx, t, 5, "g1", "g2", "g3")
	if err := b.deleteTopic(b.partitions.Topic(meta.GroupTopic)); err != nil {
		t.Fatal(err)
	}
	b.groupLog.follow()
	for _, g := range []string{"g1", "g2", "g3"} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = 7, g
		if resp := b.groups.OffsetFetch(req); len(resp.Topics) != 0 {
			t.Errorf("group %s still holds %+v after its __consumer_offsets was deleted", g, resp.Topics)
		}
	}
	if metas, err := b.store.Groups(); err != nil || len(metas) != 0 {
		t.Errorf("Badger still holds %+v (%v)", metas, err)
	}
}
