package state

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// openWithMirror is an in-memory store holding mirror "m".
func openWithMirror(t *testing.T) *Store {
	t.Helper()
	s := openMem(t)
	if err := s.PutMirror(Mirror{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// aligning is partition p of topic in mirror "m" in LOG_ALIGNMENT, with
// nothing else known.
func aligning(topic string, p int32) MirrorPartitionState {
	return MirrorPartitionState{Mirror: "m", Topic: topic, Partition: p, State: StateLogAlignment,
		Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1}
}

// at is a read time as the store keeps it (milliseconds, no monotonic
// reading), so that values compare equal after a round trip.
func at(ms int64) time.Time { return time.UnixMilli(ms) }

// A state with a source offset is stored as v2 and reads back to the
// millisecond; one without is still written as v1, byte for byte the
// layout of the states written before the source offset existed, and a
// v1 value written then reads as "never read".
func TestMirrorPartitionStateSourceOffsetFormat(t *testing.T) {
	t.Parallel()
	s := openWithMirror(t)
	p := aligning("t", 0)
	// A v1 value as the encoder before v2 wrote it (LOG_ALIGNMENT, no
	// previous, retry 0, epoch -1, offset -1, message "e").
	v1, _ := hex.DecodeString("01" + "00" + "ff" + "00000000" + "ffffffff" + "ffffffffffffffff" + "00000001" + "65")
	key := string(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "t", 0}))
	putRaw(t, s, key, v1)
	got, err := s.MirrorPartitionState("m", "t", 0)
	want := p
	want.ErrorMessage = "e"
	if err != nil || got != want {
		t.Fatalf("v1 value read as %+v, %v; want %+v", got, err, want)
	}
	if enc := appendMirrorPartitionState(nil, got); string(enc) != string(v1) {
		t.Fatalf("without a source offset the encoding is %x, want the v1 bytes %x", enc, v1)
	}

	p.State, p.SourceOffset = StateMirroring, 1234
	p.SourceOffsetTime = time.UnixMilli(1_700_000_000_123).Add(456 * time.Microsecond)
	if err := s.PutMirrorPartitionState(p); err != nil {
		t.Fatal(err)
	}
	got, err = s.MirrorPartitionState("m", "t", 0)
	if err != nil || got.SourceOffset != 1234 || !got.SourceOffsetTime.Equal(at(1_700_000_000_123)) {
		t.Fatalf("read back %+v, %v; want source offset 1234 read at ms 1700000000123", got, err)
	}
	wantV2 := "02" + "03" + "ff" + "00000000" + "ffffffff" + "ffffffffffffffff" + "00000000" +
		"00000000000004d2" + "0000018bcfe5687b"
	if enc := hex.EncodeToString(appendMirrorPartitionState(nil, got)); enc != wantV2 {
		t.Fatalf("v2 encoding %s, want %s", enc, wantV2)
	}
}

// A transition written from a state read before a checkpoint does not
// take the source offset back to the older reading.
func TestPutMirrorPartitionStateKeepsNewerSourceOffset(t *testing.T) {
	t.Parallel()
	s := openWithMirror(t)
	p := aligning("t", 3)
	p.SourceOffset, p.SourceOffsetTime = 10, at(1000)
	putState(t, s, p)
	if err := s.PutMirrorSourceOffsets("m", []MirrorSourceOffset{{Topic: "t", Partition: 3, Offset: 20, Time: at(2000)}}); err != nil {
		t.Fatal(err)
	}
	p.State = StateMirroring // the caller's copy still says 10 at 1000
	if err := s.PutMirrorPartitionState(p); err != nil {
		t.Fatal(err)
	}
	got, err := s.MirrorPartitionState("m", "t", 3)
	if err != nil || got.State != StateMirroring || got.SourceOffset != 20 || !got.SourceOffsetTime.Equal(at(2000)) {
		t.Fatalf("after the transition: %+v, %v; want MIRRORING with source offset 20 at 2000", got, err)
	}
	// A newer reading in the transition itself wins.
	p.State, p.SourceOffset, p.SourceOffsetTime = StatePausing, 30, at(3000)
	putState(t, s, p)
}

// PutMirrorSourceOffsets moves the offsets of stored states forward only,
// keeps every other field, creates no state, spans transactions, and
// reports a corrupt state after writing the others.
func TestPutMirrorSourceOffsets(t *testing.T) {
	t.Parallel()
	s := openWithMirror(t)
	failed := MirrorPartitionState{Mirror: "m", Topic: "t", Partition: 0, State: StateFailed, Previous: StateMirroring,
		RetryAttempt: 3, ErrorMessage: "boom", LastMirrorEpoch: 7, LastMirrorOffset: 70}
	putRaw(t, s, string(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "t", 0})), appendMirrorPartitionState(nil, failed))
	stopped := MirrorPartitionState{Mirror: "m", Topic: "t", Partition: 1, State: StateStopped, Previous: StateUnknown,
		LastMirrorEpoch: 4, LastMirrorOffset: 40, SourceOffset: 45, SourceOffsetTime: at(5000)}
	putRaw(t, s, string(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "t", 1})), appendMirrorPartitionState(nil, stopped))
	putRaw(t, s, string(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "t", 2})), []byte{9, 9})

	err := s.PutMirrorSourceOffsets("m", []MirrorSourceOffset{
		{Topic: "t", Partition: 0, Offset: 99, Time: at(6000).Add(time.Microsecond)},
		{Topic: "t", Partition: 1, Offset: 44, Time: at(5000)}, // not newer: skipped
		{Topic: "t", Partition: 2, Offset: 1, Time: at(6000)},  // corrupt: reported
		{Topic: "t", Partition: 5, Offset: 1, Time: at(6000)},  // no state: skipped
		{Topic: "u", Partition: 0, Offset: 1, Time: at(6000)},
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("with a corrupt state: %v, want ErrCorrupt", err)
	}
	failed.SourceOffset, failed.SourceOffsetTime = 99, at(6000)
	ps, err := s.MirrorPartitionStates("m")
	if err == nil {
		t.Fatalf("MirrorPartitionStates with a corrupt state: %+v", ps)
	}
	for _, want := range []MirrorPartitionState{failed, stopped} {
		got, err := s.MirrorPartitionState("m", "t", want.Partition)
		if err != nil || got != want {
			t.Fatalf("partition %d: %+v, %v; want %+v", want.Partition, got, err, want)
		}
	}
	for _, k := range []mirrorPartitionKey{{"m", "t", 5}, {"m", "u", 0}} {
		if _, err := s.MirrorPartitionState(k.Mirror, k.Topic, k.Partition); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%+v: a checkpoint created a state: %v", k, err)
		}
	}

	// More partitions than one transaction takes.
	n := 2*sourceOffsetsPerTxn + 7
	offs := make([]MirrorSourceOffset, n)
	for i := range offs {
		p := aligning("many", int32(i))
		putRaw(t, s, string(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "many", p.Partition})), appendMirrorPartitionState(nil, p))
		offs[i] = MirrorSourceOffset{Topic: "many", Partition: int32(i), Offset: int64(i), Time: at(7000)}
	}
	if err := s.PutMirrorSourceOffsets("m", offs); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int32{0, sourceOffsetsPerTxn - 1, sourceOffsetsPerTxn, int32(n - 1)} {
		got, err := s.MirrorPartitionState("m", "many", i)
		if err != nil || got.SourceOffset != int64(i) || !got.SourceOffsetTime.Equal(at(7000)) || got.State != StateLogAlignment {
			t.Fatalf("partition %d: %+v, %v", i, got, err)
		}
	}
}

func TestPutMirrorSourceOffsetsInvalid(t *testing.T) {
	t.Parallel()
	s := openWithMirror(t)
	p := aligning("t", 0)
	putState(t, s, p)
	good := MirrorSourceOffset{Topic: "t", Partition: 0, Offset: 5, Time: at(1000)}
	for _, tc := range []struct {
		name   string
		mirror string
		o      MirrorSourceOffset
	}{
		{"bad mirror", "a/b", good},
		{"bad topic", "m", MirrorSourceOffset{Topic: "a b", Offset: 5, Time: at(1000)}},
		{"negative partition", "m", MirrorSourceOffset{Topic: "t", Partition: -1, Offset: 5, Time: at(1000)}},
		{"negative offset", "m", MirrorSourceOffset{Topic: "t", Offset: -1, Time: at(1000)}},
		{"zero time", "m", MirrorSourceOffset{Topic: "t", Offset: 5}},
		{"1970", "m", MirrorSourceOffset{Topic: "t", Offset: 5, Time: at(0)}},
		{"before 1970", "m", MirrorSourceOffset{Topic: "t", Offset: 5, Time: at(-5)}},
	} {
		// The good entry first: nothing at all is written on a refusal.
		if err := s.PutMirrorSourceOffsets(tc.mirror, []MirrorSourceOffset{good, tc.o}); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if got, err := s.MirrorPartitionState("m", "t", 0); err != nil || got != p {
		t.Fatalf("store changed: %+v, %v", got, err)
	}
	// Source offset rules on the state itself.
	for _, tc := range []struct {
		offset int64
		t      time.Time
	}{{5, time.Time{}}, {-1, at(1000)}, {5, at(0)}, {5, at(-1)}} {
		q := p
		q.SourceOffset, q.SourceOffsetTime = tc.offset, tc.t
		err := s.PutMirrorPartitionState(q)
		if err == nil || !strings.Contains(err.Error(), "source offset") {
			t.Errorf("source offset %d at %v: %v, want a refusal naming the source offset", tc.offset, tc.t, err)
		}
	}
	if _, err := s.MirrorPartitionStates("m"); err != nil {
		t.Fatal(err)
	}
}
