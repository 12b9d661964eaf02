package group

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// off is one partition of an OffsetCommit or an expected OffsetFetch
// answer; meta nil is a null metadata.
type off struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32
	meta      *string
}

func strp(s string) *string { return &s }

// commitReq builds an OffsetCommit of offs by member (nil: a simple commit).
func commitReq(version int16, group string, m *client, offs ...off) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = version, group, -1
	if m != nil {
		req.MemberID, req.Generation = m.id, m.gen
		if m.instance != "" {
			inst := m.instance
			req.InstanceID = &inst
		}
	}
	for _, o := range offs {
		i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return t.Topic == o.topic })
		if i < 0 {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = o.topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.partition, o.offset, o.epoch, o.meta
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// commitCodes returns the partition codes of an OffsetCommit, in request
// order.
func commitCodes(t *testing.T, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) []int16 {
	t.Helper()
	var codes []int16
	if len(resp.Topics) != len(req.Topics) {
		t.Fatalf("%d topics answered, want %d", len(resp.Topics), len(req.Topics))
	}
	for i, rt := range resp.Topics {
		if rt.Topic != req.Topics[i].Topic || len(rt.Partitions) != len(req.Topics[i].Partitions) {
			t.Fatalf("topic %d answered %s with %d partitions", i, rt.Topic, len(rt.Partitions))
		}
		for _, rp := range rt.Partitions {
			codes = append(codes, rp.ErrorCode)
		}
	}
	return codes
}

// fetched flattens an OffsetFetch group answer as "topic/partition=offset
// epoch meta".
func fetched(topics []kmsg.OffsetFetchResponseGroupTopic) []string {
	var out []string
	for _, t := range topics {
		for _, p := range t.Partitions {
			meta := "<nil>"
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			code := ""
			if p.ErrorCode != 0 {
				code = " " + errName(p.ErrorCode)
			}
			out = append(out, fmt.Sprintf("%s/%d=%d e%d %q%s", t.Topic, p.Partition, p.Offset, p.LeaderEpoch, meta, code))
		}
	}
	return out
}

// fetchAll returns every committed offset of group (OffsetFetch v8).
func fetchAll(t *testing.T, c *Coordinator, group string) []string {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	req.Groups = append(req.Groups, rg)
	resp := c.OffsetFetch(req)
	wantCode(t, "fetch", resp.Groups[0].ErrorCode, nil)
	return fetched(resp.Groups[0].Topics)
}

func wantFetched(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("fetched\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// Who may commit: a simple committer into an empty group, a member of the
// current generation outside CompletingRebalance.
func TestOffsetCommitMembership(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// setup returns the committer (nil: a simple commit) into "g".
		setup func(t *testing.T, c *Coordinator) *client
		group string
		want  *kerr.Error
	}{
		{"simple commit, new group", func(*testing.T, *Coordinator) *client { return nil }, "g", nil},
		{"simple commit, emptied group", func(t *testing.T, c *Coordinator) *client {
			a := newClient(t, c, "g", "a")
			form(t, a)
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Group, req.MemberID = "g", a.id
			wantCode(t, "leave", c.LeaveGroup(req).ErrorCode, nil)
			return nil
		}, "g", nil},
		{"simple commit, active group", func(t *testing.T, c *Coordinator) *client {
			form(t, newClient(t, c, "g", "a"))
			return nil
		}, "g", kerr.UnknownMemberID},
		{"member of the generation", func(t *testing.T, c *Coordinator) *client {
			a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
			form(t, a, b)
			return b
		}, "g", nil},
		{"static member", func(t *testing.T, c *Coordinator) *client {
			a := newClient(t, c, "g", "a")
			a.instance = "inst-a"
			form(t, a)
			return a
		}, "g", nil},
		{"fenced static member", func(t *testing.T, c *Coordinator) *client {
			a := newClient(t, c, "g", "a")
			a.instance = "inst-a"
			form(t, a)
			zombie := *a
			a.id = ""
			a.joined(recv(t, a.join()))
			return &zombie
		}, "g", kerr.FencedInstanceID},
		{"old generation", func(t *testing.T, c *Coordinator) *client {
			a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
			form(t, a, b)
			a.gen--
			return a
		}, "g", kerr.IllegalGeneration},
		{"unknown member", func(t *testing.T, c *Coordinator) *client {
			a := newClient(t, c, "g", "a")
			form(t, a)
			return &client{t: t, c: c, group: "g", id: "stranger", gen: a.gen}
		}, "g", kerr.UnknownMemberID},
		{"completing rebalance", func(t *testing.T, c *Coordinator) *client {
			a := newClient(t, c, "g", "a")
			a.joined(recv(t, a.join())) // no sync
			return a
		}, "g", kerr.RebalanceInProgress},
		{"preparing rebalance", func(t *testing.T, c *Coordinator) *client {
			// Kafka takes commits while members learn of the rebalance.
			a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
			form(t, a)
			b.join()
			waitState(t, c, "g", "PreparingRebalance", 2)
			return a
		}, "g", nil},
		{"empty group id", func(*testing.T, *Coordinator) *client { return nil }, "", kerr.InvalidGroupID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newMemStore()
			c := newCoordinator(t, store, Config{})
			m := tt.setup(t, c)
			req := commitReq(8, tt.group, m, off{"t", 0, 42, 1, nil}, off{"t", 1, 43, 1, nil})
			codes := commitCodes(t, req, c.OffsetCommit(req))
			for _, code := range codes {
				wantCode(t, "commit", code, tt.want)
			}
			if tt.group == "" {
				return
			}
			got := fetchAll(t, c, "g")
			offs, _ := store.GroupOffsets("g")
			if tt.want != nil {
				if len(got) != 0 || len(offs) != 0 {
					t.Fatalf("refused commit stored %q (store %v)", got, offs)
				}
				return
			}
			wantFetched(t, got, `t/0=42 e1 ""`, `t/1=43 e1 ""`)
			if len(offs) != 2 {
				t.Fatalf("store holds %v", offs)
			}
		})
	}
}

// Partition-level refusals leave the other partitions of the commit
// committed.
func TestOffsetCommitPartitionErrors(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{
		MaxMetadataBytes: 8,
		PartitionExists:  func(topic string, p int32) bool { return topic != "missing" && p < 3 },
	})
	req := commitReq(8, "g", nil,
		off{"t", 0, 10, 2, strp("12345678")},
		off{"t", 1, 11, 2, strp("123456789")},
		off{"t", 3, 13, 2, nil},
		off{"missing", 0, 1, -1, nil},
		off{"u", 2, 12, -1, nil},
	)
	codes := commitCodes(t, req, c.OffsetCommit(req))
	want := []int16{0, kerr.OffsetMetadataTooLarge.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code, 0}
	if !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}
	wantFetched(t, fetchAll(t, c, "g"), `t/0=10 e2 "12345678"`, `u/2=12 e-1 ""`)
}

// A store failure refuses the whole commit and caches nothing.
func TestOffsetCommitStoreFailure(t *testing.T) {
	t.Parallel()
	store := newMemStore()
	store.failCommits = errors.New("disk on fire")
	c := newCoordinator(t, store, Config{})
	req := commitReq(8, "g", nil, off{"t", 0, 10, 2, nil}, off{"u", 0, 10, 2, nil})
	for _, code := range commitCodes(t, req, c.OffsetCommit(req)) {
		wantCode(t, "commit", code, kerr.CoordinatorNotAvailable)
	}
	wantFetched(t, fetchAll(t, c, "g"))
}

func TestOffsetFetch(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{})
	req := commitReq(9, "g", nil,
		off{"t1", 2, 12, 4, nil},
		off{"t1", 0, 10, 3, strp("m0")},
		off{"t0", 1, 5, 1, strp("x")},
	)
	for _, code := range commitCodes(t, req, c.OffsetCommit(req)) {
		wantCode(t, "commit", code, nil)
	}
	// Before v6 a commit has no leader epoch.
	req = commitReq(5, "g2", nil, off{"t", 0, 7, 9, strp("old")})
	for _, code := range commitCodes(t, req, c.OffsetCommit(req)) {
		wantCode(t, "v5 commit", code, nil)
	}

	type topic struct {
		name       string
		partitions []int32
	}
	allOfG := []string{`t0/1=5 e1 "x"`, `t1/0=10 e3 "m0"`, `t1/2=12 e4 ""`}
	for _, tt := range []struct {
		name   string
		group  string
		topics []topic // nil: every committed offset
		want   []string
		code   *kerr.Error
	}{
		{"all topics", "g", nil, allOfG, nil},
		{"listed partitions", "g", []topic{{"t1", []int32{1, 0}}, {"t9", []int32{0}}},
			[]string{`t1/1=-1 e-1 ""`, `t1/0=10 e3 "m0"`, `t9/0=-1 e-1 ""`}, nil},
		{"no topics", "g", []topic{}, nil, nil},
		{"v5 commit", "g2", nil, []string{`t/0=7 e-1 "old"`}, nil},
		{"unknown group, all topics", "nope", nil, nil, nil},
		{"unknown group, listed", "nope", []topic{{"t1", []int32{0}}}, []string{`t1/0=-1 e-1 ""`}, nil},
		{"empty group id", "", []topic{{"t1", []int32{0}}}, []string{`t1/0=-1 e-1 ""`}, kerr.InvalidGroupID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// v7: one group.
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version, req.Group = 7, tt.group
			if tt.topics != nil {
				req.Topics = []kmsg.OffsetFetchRequestTopic{}
				for _, tp := range tt.topics {
					rt := kmsg.NewOffsetFetchRequestTopic()
					rt.Topic, rt.Partitions = tp.name, tp.partitions
					req.Topics = append(req.Topics, rt)
				}
			}
			resp := c.OffsetFetch(req)
			wantCode(t, "v7 fetch", resp.ErrorCode, tt.code)
			var v7 []string
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					v7 = append(v7, fmt.Sprintf("%s/%d=%d e%d %q", rt.Topic, rp.Partition, rp.Offset, rp.LeaderEpoch, *rp.Metadata))
				}
			}
			wantFetched(t, v7, tt.want...)

			// v8: the same group between two others.
			req = kmsg.NewPtrOffsetFetchRequest()
			req.Version = 8
			for i, name := range []string{"g2", tt.group, "g"} {
				rg := kmsg.NewOffsetFetchRequestGroup()
				rg.Group = name
				if i == 1 && tt.topics != nil {
					rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
					for _, tp := range tt.topics {
						rt := kmsg.NewOffsetFetchRequestGroupTopic()
						rt.Topic, rt.Partitions = tp.name, tp.partitions
						rg.Topics = append(rg.Topics, rt)
					}
				}
				req.Groups = append(req.Groups, rg)
			}
			resp = c.OffsetFetch(req)
			if len(resp.Groups) != 3 {
				t.Fatalf("v8: %d groups", len(resp.Groups))
			}
			for i, name := range []string{"g2", tt.group, "g"} {
				if resp.Groups[i].Group != name {
					t.Fatalf("v8 group %d is %q, want %q", i, resp.Groups[i].Group, name)
				}
			}
			wantCode(t, "v8 fetch", resp.Groups[1].ErrorCode, tt.code)
			wantFetched(t, fetched(resp.Groups[0].Topics), `t/0=7 e-1 "old"`)
			wantFetched(t, fetched(resp.Groups[1].Topics), tt.want...)
			wantFetched(t, fetched(resp.Groups[2].Topics), allOfG...)
		})
	}
}

func TestOffsetDelete(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// setup makes group "g" (with offsets on sub/0 and other/0).
		setup     func(t *testing.T, c *Coordinator)
		group     string
		wantGroup *kerr.Error
		wantSub   *kerr.Error
		wantLeft  []string
	}{
		{"empty group", func(*testing.T, *Coordinator) {}, "g", nil, nil, nil},
		{"subscribed consumer group", func(t *testing.T, c *Coordinator) {
			a := newClient(t, c, "g", "a")
			a.protocols = consumerProtos([]string{"sub", "more"}, "range")
			form(t, a)
		}, "g", nil, kerr.GroupSubscribedToTopic, []string{`sub/0=1 e-1 ""`}},
		{"subscribed consumer group, rebalancing", func(t *testing.T, c *Coordinator) {
			a := newClient(t, c, "g", "a")
			a.version = 3
			a.protocols = consumerProtos([]string{"sub"}, "range", "roundrobin")
			a.join()
			waitState(t, c, "g", "CompletingRebalance", 1)
			b := newClient(t, c, "g", "b")
			b.protocols = consumerProtos([]string{"more"}, "roundrobin")
			b.join()
			waitState(t, c, "g", "PreparingRebalance", 2)
		}, "g", nil, kerr.GroupSubscribedToTopic, []string{`sub/0=1 e-1 ""`}},
		{"active group of another protocol", func(t *testing.T, c *Coordinator) {
			a := newClient(t, c, "g", "a")
			a.protocolType = "connect"
			form(t, a)
		}, "g", kerr.NonEmptyGroup, nil, []string{`other/0=2 e-1 ""`, `sub/0=1 e-1 ""`}},
		{"unknown group", func(*testing.T, *Coordinator) {}, "nope", kerr.GroupIDNotFound, nil, []string{`other/0=2 e-1 ""`, `sub/0=1 e-1 ""`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newMemStore()
			c := newCoordinator(t, store, Config{})
			req := commitReq(8, "g", nil, off{"sub", 0, 1, -1, nil}, off{"other", 0, 2, -1, nil})
			for _, code := range commitCodes(t, req, c.OffsetCommit(req)) {
				wantCode(t, "commit", code, nil)
			}
			tt.setup(t, c)
			del := kmsg.NewPtrOffsetDeleteRequest()
			del.Group = tt.group
			for _, topic := range []string{"sub", "other"} {
				rt := kmsg.NewOffsetDeleteRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rp.Partition = 0
				rt.Partitions = append(rt.Partitions, rp)
				del.Topics = append(del.Topics, rt)
			}
			resp := c.OffsetDelete(del)
			wantCode(t, "delete", resp.ErrorCode, tt.wantGroup)
			if tt.wantGroup == nil {
				if len(resp.Topics) != 2 {
					t.Fatalf("%d topics answered", len(resp.Topics))
				}
				wantCode(t, "sub/0", resp.Topics[0].Partitions[0].ErrorCode, tt.wantSub)
				wantCode(t, "other/0", resp.Topics[1].Partitions[0].ErrorCode, nil)
			}
			wantFetched(t, fetchAll(t, c, "g"), tt.wantLeft...)
			offs, _ := store.GroupOffsets("g")
			if len(offs) != len(tt.wantLeft) {
				t.Fatalf("store holds %v, want %d offsets", offs, len(tt.wantLeft))
			}
		})
	}
}

// TopicDeleted forgets the topic's offsets in every group.
func TestTopicDeleted(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{})
	for _, g := range []string{"g1", "g2"} {
		req := commitReq(8, g, nil, off{"gone", 0, 1, -1, nil}, off{"gone", 1, 1, -1, nil}, off{"kept", 0, 2, -1, nil})
		for _, code := range commitCodes(t, req, c.OffsetCommit(req)) {
			wantCode(t, "commit", code, nil)
		}
	}
	c.TopicDeleted("gone")
	for _, g := range []string{"g1", "g2"} {
		wantFetched(t, fetchAll(t, c, g), `kept/0=2 e-1 ""`)
	}
}
