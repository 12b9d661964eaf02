package state

import (
	"reflect"
	"testing"
	"time"
)

// captured is a Replicator that keeps what it is given and applies it.
type captured struct {
	s   *Store
	ops [][]Op
}

func (c *captured) Replicate(ops []Op) error {
	c.ops = append(c.ops, ops)
	return c.s.ApplyOps(uint64(len(c.ops))+100, ops)
}

// A leader's mirror partition state writes, captured as ops, decode back
// into the states written, so that the controller can write them again;
// ops of any other family, or deletions, are not a leader's to forward.
func TestMirrorPartitionStatesOfCapturedOps(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.PutMirror(Mirror{Name: "m", Configs: map[string]string{"bootstrap.servers": "x:9092"}}); err != nil {
		t.Fatal(err)
	}
	rep := &captured{s: s}
	s.SetReplicator(rep)
	want := []MirrorPartitionState{
		{Mirror: "m", Topic: "t", Partition: 0, State: StateLogAlignment, Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1},
		{Mirror: "m", Topic: "t", Partition: 1, State: StateLogAlignment, Previous: StateUnknown, LastMirrorEpoch: 4, LastMirrorOffset: 17,
			SourceOffset: 99, SourceOffsetTime: time.UnixMilli(1_700_000_000_123)},
	}
	if err := s.PutMirrorPartitionStates(want); err != nil {
		t.Fatal(err)
	}
	if len(rep.ops) != 1 {
		t.Fatalf("%d entries, want 1", len(rep.ops))
	}
	got, ok, err := MirrorPartitionStatesOf(rep.ops[0])
	if err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v %v %v, want %+v", got, ok, err, want)
	}
	for i, p := range want {
		v, err := MirrorPartitionStateRecord(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeMirrorPartitionStateRecord(p.Mirror, p.Topic, p.Partition, v)
		if err != nil || !reflect.DeepEqual(back, want[i]) {
			t.Fatalf("record of %+v decodes as %+v, %v", p, back, err)
		}
	}

	if err := s.PutTopic(Topic{Name: "other", ID: tid(9), Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := MirrorPartitionStatesOf(rep.ops[len(rep.ops)-1]); ok || err != nil {
		t.Fatalf("a topic write decoded as mirror states: %v %v", ok, err)
	}
	if err := s.DeleteMirrorPartitionStates("m", "t"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := MirrorPartitionStatesOf(rep.ops[len(rep.ops)-1]); ok {
		t.Fatal("a deletion decoded as mirror states")
	}
	if _, err := DecodeMirrorPartitionStateRecord("m", "t", 0, []byte{1, 2}); err == nil {
		t.Fatal("a truncated record decoded")
	}
	if _, err := MirrorPartitionStateRecord(MirrorPartitionState{Mirror: "m", Topic: "t", State: StateUnknown}); err == nil {
		t.Fatal("an UNKNOWN state encoded")
	}
}
