package mirrorapi

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The kmirror additions to StopMirrorTopics (final sync, per-partition
// end of the copy) and DescribeClusterMirrors (last group sync) are
// tagged fields, so both directions of a mixed deployment work: a reader
// that does not know them (the prototype's, or kmirror's before them;
// kmsg.UpdateFeaturesResponse has the very layout of the topic-level
// responses) skips them and reads the rest unchanged, and this reader
// takes an answer without them as "not reported".

func stopReport() *StopMirrorTopicsResponse {
	return &StopMirrorTopicsResponse{ThrottleMillis: 3, Topics: []MirrorTopicsResponseTopic{
		{Name: "orders", FinalSync: FinalSyncDone, Partitions: []StopMirrorTopicsResponsePartition{
			{PartitionIndex: 0, SourceOffset: 120, SourceOffsetMillis: 5, DestinationOffset: 100, Lag: 20}}},
		{Name: "ledger", FinalSync: FinalSyncSkipped, FinalSyncMessage: sp("source unreachable")},
		{Name: "nope", ErrorCode: ErrTopicNotInClusterMirror, ErrorMessage: sp("not in m")},
	}}
}

func TestStopReportGolden(t *testing.T) {
	t.Parallel()
	r := &StopMirrorTopicsResponse{Topics: []MirrorTopicsResponseTopic{{Name: "t", FinalSync: FinalSyncFailed,
		FinalSyncMessage: sp("e"), Partitions: []StopMirrorTopicsResponsePartition{
			{PartitionIndex: 1, SourceOffset: 2, SourceOffsetMillis: 3, DestinationOffset: 4, Lag: 5}}}}}
	want := "00000000" + "0000" + "00" + "02" +
		"0274" + "0000" + "00" + // Name, ErrorCode, ErrorMessage null
		"03" + // three topic tags
		"00" + "01" + "03" + // FinalSync
		"01" + "02" + "0265" + // FinalSyncMessage
		"02" + "26" + "02" + "00000001" + "0000000000000002" + "0000000000000003" + "0000000000000004" + "0000000000000005" + "00" +
		"00" // top-level tags
	if got := hex.EncodeToString(r.AppendTo(nil)); got != want {
		t.Fatalf("AppendTo\n got %s\nwant %s", got, want)
	}
	roundTrip(t, r)
}

// An older reader skips the additions: kmsg decodes the same topics, with
// the additions as unknown tags of the topic it ignores.
func TestStopReportOldReader(t *testing.T) {
	t.Parallel()
	ours := stopReport()
	var old kmsg.UpdateFeaturesResponse
	if err := old.ReadFrom(ours.AppendTo(nil)); err != nil {
		t.Fatalf("an old reader on the new answer: %v", err)
	}
	if old.ThrottleMillis != ours.ThrottleMillis || len(old.Results) != len(ours.Topics) {
		t.Fatalf("old reader: %+v", old)
	}
	for i, r := range old.Results {
		o := ours.Topics[i]
		if r.Feature != o.Name || r.ErrorCode != o.ErrorCode || !reflect.DeepEqual(r.ErrorMessage, o.ErrorMessage) {
			t.Errorf("old reader topic %d: %+v, want %s %d %v", i, r, o.Name, o.ErrorCode, o.ErrorMessage)
		}
	}
	if old.Results[0].UnknownTags.Len() != 2 || old.Results[2].UnknownTags.Len() != 0 {
		t.Errorf("old reader: unknown tags %d and %d, want 2 (final sync, partitions) and 0",
			old.Results[0].UnknownTags.Len(), old.Results[2].UnknownTags.Len())
	}
}

// An answer without the additions (an older kmirror, the prototype) reads
// as "not reported", and the additions unset write nothing.
func TestStopReportFromOldServer(t *testing.T) {
	t.Parallel()
	k := kmsg.UpdateFeaturesResponse{Version: 0, Results: []kmsg.UpdateFeaturesResponseResult{{Feature: "orders"}}}
	var got StopMirrorTopicsResponse
	if err := got.ReadFrom(k.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	tp := got.Topics[0]
	if tp.Name != "orders" || tp.FinalSync != FinalSyncUnknown || tp.FinalSyncMessage != nil || tp.Partitions != nil {
		t.Fatalf("old server's topic read as %+v", tp)
	}
	empty := &StopMirrorTopicsResponse{Topics: []MirrorTopicsResponseTopic{{Name: "orders", Partitions: []StopMirrorTopicsResponsePartition{}}}}
	if a, b := empty.AppendTo(nil), k.AppendTo(nil); !bytes.Equal(a, b) {
		t.Fatalf("unset additions written: %x, want the old layout %x", a, b)
	}
}

func TestLastGroupSyncTag(t *testing.T) {
	t.Parallel()
	m := &DescribeClusterMirrorsResponse{Mirrors: []DescribeClusterMirrorsResponseMirror{{MirrorName: "m",
		AuthorizedOperations: -1, LastGroupSyncMillis: 0x0102}}}
	want := "00000000" + "0000" + "00" + "02" +
		"0000" + "026d" + "ffffffff" + "01" +
		"01" + "01" + "08" + "0000000000000102" + // mirror tags: LastGroupSyncMillis
		"00"
	if got := hex.EncodeToString(m.AppendTo(nil)); got != want {
		t.Fatalf("AppendTo\n got %s\nwant %s", got, want)
	}
	roundTrip(t, m)

	// Without it (an older kmirror): 0, "not reported"; and 0 is not
	// written.
	m.Mirrors[0].LastGroupSyncMillis = 0
	b := m.AppendTo(nil)
	if !bytes.HasSuffix(b, []byte{0x01, 0x00, 0x00}) { // topics empty, no mirror tags, no top tags
		t.Fatalf("LastGroupSyncMillis 0 written: %x", b)
	}
	var back DescribeClusterMirrorsResponse
	if err := back.ReadFrom(b); err != nil || back.Mirrors[0].LastGroupSyncMillis != 0 {
		t.Fatalf("read back %+v, %v", back, err)
	}

	// A value that is not an int64 is malformed, not skipped.
	bad := withTags(b[:len(b)-1], tagField(1, kbin.AppendInt32(nil, 1)))
	bad = append(bad, 0)
	if err := back.ReadFrom(bad); err == nil {
		t.Fatal("a 4-byte LastGroupSyncMillis decoded")
	}
}
