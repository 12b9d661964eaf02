package mirrorapi

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"
)

// TestDescribeOldLayout: the prototype's DescribeClusterMirrors partition
// and topic (and kmirror's before its tags existed) carry no tagged
// fields. Such a response decodes with the kmirror additions at their
// defaults (age and lag in time unknown, not stalled, no topic id), and a reader of the
// old schema, which skips tags it does not know (KIP-482), reads a new
// partition's fixed fields unchanged.
func TestDescribeOldLayout(t *testing.T) {
	t.Parallel()
	old, err := hex.DecodeString("00000000" + "0000" + "00" + "02" +
		"0000" + "026d" + "80000000" + "02" + "0274" + "02" +
		"00000001" + "0000000000000002" + "0000000000000003" + "0000000000000004" + "0253" + "0005" + "00" + "00" +
		"00" + "00" + "00")
	if err != nil {
		t.Fatal(err)
	}
	var d DescribeClusterMirrorsResponse
	if err := d.ReadFrom(old); err != nil {
		t.Fatal(err)
	}
	dt := d.Mirrors[0].Topics[0]
	p := dt.Partitions[0]
	if p.SourceOffsetAgeMillis != -1 || p.Stalled || p.LagMillis != -1 || dt.TopicID != ([16]byte{}) {
		t.Fatalf("old layout decoded with age %d, stalled %v, lag %d ms, topic id %x; want -1, false, -1, zero",
			p.SourceOffsetAgeMillis, p.Stalled, p.LagMillis, dt.TopicID)
	}
	if p.SourceOffset != 2 || p.DestinationOffset != 3 || p.Lag != 4 || p.StateValue != "S" || p.RetryAttempt != 5 {
		t.Fatalf("old layout fixed fields: %+v", p)
	}
	if b := d.AppendTo(nil); !bytes.Equal(b, old) {
		t.Fatalf("re-encoded %x, want the old layout %x", b, old)
	}

	// An old reader of a new partition: the fixed fields, then a tag
	// section it skips whole.
	np := DescribeClusterMirrorsResponsePartition{PartitionIndex: 4, SourceOffset: 10, DestinationOffset: 8, Lag: 2,
		StateValue: "MIRRORING", RetryAttempt: 0, ErrorMessage: sp("e"), SourceOffsetAgeMillis: 1500, Stalled: true, LagMillis: 1700}
	r := newReader(np.appendTo(nil))
	got := DescribeClusterMirrorsResponsePartition{PartitionIndex: r.Int32(), SourceOffset: r.Int64(),
		DestinationOffset: r.Int64(), Lag: r.Int64(), StateValue: r.str(), RetryAttempt: int32(r.Int16()),
		ErrorMessage: r.nullableStr()}
	r.noTags()
	if err := r.complete(); err != nil {
		t.Fatal(err)
	}
	got.SourceOffsetAgeMillis, got.Stalled, got.LagMillis = np.SourceOffsetAgeMillis, np.Stalled, np.LagMillis
	if !reflect.DeepEqual(got, np) {
		t.Fatalf("old reader: %+v, want %+v", got, np)
	}
}
