package mirrorapi

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Differential tests: our bytes against kmsg's for kmsg messages of the
// same shape (field kinds in the same order, flexible).

func TestDifferentialErrorResponse(t *testing.T) {
	t.Parallel()
	// UnregisterBroker v0: ThrottleMillis int32, ErrorCode int16,
	// ErrorMessage nullable string.
	for _, msg := range []*string{nil, sp(""), sp("boom"), sp(long)} {
		k := kmsg.UnregisterBrokerResponse{Version: 0, ThrottleMillis: 9, ErrorCode: 137, ErrorMessage: msg}
		want := k.AppendTo(nil)
		for _, m := range []message{
			&CreateClusterMirrorResponse{ThrottleMillis: 9, ErrorCode: 137, ErrorMessage: msg},
			&DeleteClusterMirrorResponse{ThrottleMillis: 9, ErrorCode: 137, ErrorMessage: msg},
		} {
			if got := m.AppendTo(nil); !bytes.Equal(got, want) {
				t.Errorf("%s: %x, kmsg %x", typeName(m), got, want)
			}
		}
	}
}

func TestDifferentialMirrorTopicsResponse(t *testing.T) {
	t.Parallel()
	// UpdateFeatures v0: ThrottleMillis, ErrorCode, ErrorMessage,
	// Results []{Feature string, ErrorCode int16, ErrorMessage nullable}.
	// The first StartMirrorTopicsResponse of fullMessages: the second is
	// a dry run's, whose additions kmsg reads as unknown tags.
	var full StartMirrorTopicsResponse
	for _, m := range fullMessages() {
		if r, ok := m.(*StartMirrorTopicsResponse); ok {
			full = *r
			break
		}
	}
	for _, v := range []StartMirrorTopicsResponse{full, {}, {ErrorMessage: sp("")}} {
		k := kmsg.UpdateFeaturesResponse{Version: 0, ThrottleMillis: v.ThrottleMillis, ErrorCode: v.ErrorCode, ErrorMessage: v.ErrorMessage}
		for _, tp := range v.Topics {
			k.Results = append(k.Results, kmsg.UpdateFeaturesResponseResult{Feature: tp.Name, ErrorCode: tp.ErrorCode, ErrorMessage: tp.ErrorMessage})
		}
		want := k.AppendTo(nil)
		for _, m := range []message{
			&v, (*StopMirrorTopicsResponse)(&v), (*PauseMirrorTopicsResponse)(&v),
			(*ResumeMirrorTopicsResponse)(&v), (*RecoverMirrorTopicsResponse)(&v),
		} {
			if got := m.AppendTo(nil); !bytes.Equal(got, want) {
				t.Errorf("%s: %x, kmsg %x", typeName(m), got, want)
			}
		}

		// kmsg decodes our bytes, and we decode kmsg's, also with unknown
		// tags at both levels.
		var back kmsg.UpdateFeaturesResponse
		if err := back.ReadFrom(v.AppendTo(nil)); err != nil || !reflect.DeepEqual(normalizedKmsg(&back), normalizedKmsg(&k)) {
			t.Errorf("kmsg decoding ours: %v\n got %#v\nwant %#v", err, back, k)
		}
		k.UnknownTags.Set(7, []byte("top"))
		if len(k.Results) > 0 {
			k.Results[0].UnknownTags.Set(9, []byte("nested")) // tags 0-2 are the stop's additions
		}
		var ours StartMirrorTopicsResponse
		if err := ours.ReadFrom(k.AppendTo(nil)); err != nil {
			t.Fatalf("reading kmsg bytes with unknown tags: %v", err)
		}
		if !reflect.DeepEqual(*normalized(&ours).(*StartMirrorTopicsResponse), *normalized(&v).(*StartMirrorTopicsResponse)) {
			t.Errorf("reading kmsg bytes: got %#v, want %#v", ours, v)
		}
	}
}

func normalizedKmsg(v any) any {
	normalize(reflect.ValueOf(v))
	return v
}

func TestDifferentialListRequest(t *testing.T) {
	t.Parallel()
	// DescribeCluster v0: IncludeClusterAuthorizedOperations bool.
	for _, b := range []bool{false, true} {
		want := (&kmsg.DescribeClusterRequest{Version: 0, IncludeClusterAuthorizedOperations: b}).AppendTo(nil)
		if got := (&ListClusterMirrorsRequest{IncludeTopicNames: b}).AppendTo(nil); !bytes.Equal(got, want) {
			t.Errorf("%v: %x, kmsg %x", b, got, want)
		}
	}
}

func TestDifferentialTopicRequests(t *testing.T) {
	t.Parallel()
	// DeleteShareGroupOffsets v0: GroupID string, Topics []{TopicName string}.
	for _, names := range [][]string{nil, {""}, {"a", long, "b"}} {
		k := kmsg.DeleteShareGroupOffsetsRequest{Version: 0, GroupID: "east"}
		var topics []MirrorTopicsRequestTopic
		for _, n := range names {
			k.Topics = append(k.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: n})
			topics = append(topics, MirrorTopicsRequestTopic{TopicName: n})
		}
		want := k.AppendTo(nil)
		if got := (&RecoverMirrorTopicsRequest{MirrorName: "east", Topics: topics}).AppendTo(nil); !bytes.Equal(got, want) {
			t.Errorf("recover: %x, kmsg %x", got, want)
		}
		// Pause/Resume: the same, then StateValidationOffset before the tags.
		withOffset := append(append([]byte(nil), want[:len(want)-1]...), kbin.AppendInt64(nil, -1)...)
		withOffset = append(withOffset, 0)
		for _, m := range []message{
			&PauseMirrorTopicsRequest{MirrorName: "east", Topics: topics, StateValidationOffset: -1},
			&ResumeMirrorTopicsRequest{MirrorName: "east", Topics: topics, StateValidationOffset: -1},
		} {
			if got := m.AppendTo(nil); !bytes.Equal(got, withOffset) {
				t.Errorf("%s: %x, want %x", typeName(m), got, withOffset)
			}
		}
	}
}

func TestDifferentialDescribe(t *testing.T) {
	t.Parallel()
	lookups := []DescribeClusterMirrorsLookup{{TopicID: uuidA, Partitions: []int32{0, 1, 2}}, {TopicID: uuidB}}

	// ConsumerGroupHeartbeat v0 ends with Topics []{TopicID uuid,
	// Partitions []int32}: the shape of LastMirrorEpochLookups.
	hb := kmsg.ConsumerGroupHeartbeatRequest{Version: 0, Group: "g", MemberID: "m"}
	for _, l := range lookups {
		hb.Topics = append(hb.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: l.TopicID, Partitions: l.Partitions})
	}
	hbBytes := hb.AppendTo(nil)
	lookupArray := appendArray(nil, lookups)
	if !bytes.HasSuffix(hbBytes, append(append([]byte(nil), lookupArray...), 0)) {
		t.Errorf("lookups %x are not the tail of kmsg's %x", lookupArray, hbBytes)
	}

	// ConsumerGroupDescribe v0: GroupIDs []string,
	// IncludeAuthorizedOperations bool; add our two tags as kmsg unknown
	// tags and the whole request must match.
	cg := kmsg.ConsumerGroupDescribeRequest{Version: 0, Groups: []string{"east", long}, IncludeAuthorizedOperations: true}
	cg.UnknownTags.Set(0, appendNullableStr(nil, sp("dest")))
	cg.UnknownTags.Set(1, lookupArray)
	ours := &DescribeClusterMirrorsRequest{MirrorNames: []string{"east", long}, IncludeAuthorizedOperations: true,
		ClusterID: sp("dest"), LastMirrorEpochLookups: lookups}
	if got, want := ours.AppendTo(nil), cg.AppendTo(nil); !bytes.Equal(got, want) {
		t.Errorf("describe request: %x, kmsg %x", got, want)
	}

	// ReadShareGroupState v0: GroupID string, Topics []{TopicID uuid,
	// Partitions []{Partition int32, LeaderEpoch int32}}: the shape of
	// LookupResults.
	results := []DescribeClusterMirrorsLookupResult{
		{TopicID: uuidA, Partitions: []DescribeClusterMirrorsLookupPartition{{0, 5}, {1, -1}}},
		{TopicID: uuidB},
	}
	rs := kmsg.ReadShareGroupStateRequest{Version: 0, GroupID: "g"}
	for _, r := range results {
		kt := kmsg.ReadShareGroupStateRequestTopic{TopicID: r.TopicID}
		for _, p := range r.Partitions {
			kt.Partitions = append(kt.Partitions, kmsg.ReadShareGroupStateRequestTopicPartition{Partition: p.PartitionIndex, LeaderEpoch: p.LastMirrorEpoch})
		}
		rs.Topics = append(rs.Topics, kt)
	}
	rsBytes := rs.AppendTo(nil)
	if got, want := appendArray(nil, results), rsBytes[2:len(rsBytes)-1]; !bytes.Equal(got, want) {
		t.Errorf("lookup results: %x, kmsg %x", got, want)
	}
}
