package state

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// replicatedFixture fills s with records of replicated families (topics,
// ACLs) and of a node's own (a group's offsets).
func replicatedFixture(t *testing.T, s *Store, topics ...string) {
	t.Helper()
	for i, name := range topics {
		if err := s.PutTopic(Topic{Name: name, ID: tid(byte(i+1), 9), Partitions: int32(i + 1),
			Configs: map[string]string{"cleanup.policy": "compact"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutACLs([]ACL{{ResourceType: 2, ResourceName: topics[0], PatternType: 3, Principal: "User:a",
		Host: "*", Operation: 3, Permission: 3}}); err != nil {
		t.Fatal(err)
	}
}

func snapshotOf(t *testing.T, s *Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.WriteMetadataSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A snapshot restored on another store replaces its replicated records
// (a topic it had and the snapshot has not is gone) and keeps its own
// (group offsets); the two stores then write the same snapshot bytes.
func TestMetadataSnapshotRestore(t *testing.T) {
	t.Parallel()
	a, b := openMem(t), openMem(t)
	replicatedFixture(t, a, "orders", "payments")
	replicatedFixture(t, b, "stale")
	own := []GroupOffset{{Topic: "stale", Partition: 0, Offset: 42, LeaderEpoch: -1}}
	if err := b.CommitOffsets("g", own); err != nil {
		t.Fatal(err)
	}
	snap := snapshotOf(t, a)
	if err := a.ApplyOps(7, nil); err != nil { // a's records are those of entry 7
		t.Fatal(err)
	}
	snap = snapshotOf(t, a)
	index, ops, err := ReadMetadataSnapshot(bytes.NewReader(snap))
	if err != nil || index != 7 {
		t.Fatalf("snapshot of index %d, %v; want 7", index, err)
	}
	if err := b.RestoreMetadata(index, ops); err != nil {
		t.Fatal(err)
	}
	wantTopics, _ := a.Topics()
	if got, err := b.Topics(); err != nil || !reflect.DeepEqual(got, wantTopics) {
		t.Fatalf("topics after restore: %+v, %v; want %+v", got, err, wantTopics)
	}
	wantACLs, _ := a.ACLs()
	if got, err := b.ACLs(); err != nil || !reflect.DeepEqual(got, wantACLs) {
		t.Fatalf("ACLs after restore: %+v, %v; want %+v", got, err, wantACLs)
	}
	if got, err := b.GroupOffsets("g"); err != nil || !reflect.DeepEqual(got, own) {
		t.Fatalf("the node's own group offsets after restore: %+v, %v", got, err)
	}
	if i, err := b.MetadataApplied(); i != 7 || err != nil {
		t.Fatalf("applied index %d, %v; want 7", i, err)
	}
	if again := snapshotOf(t, b); !bytes.Equal(again, snap) {
		t.Fatalf("the restored store writes another snapshot:\n%q\n%q", again, snap)
	}
}

// ApplyOps applies a change on every node alike, and refuses a key of a
// node's own family or a value this package could not have written,
// changing nothing.
func TestApplyOps(t *testing.T) {
	t.Parallel()
	a, b := openMem(t), openMem(t)
	replicatedFixture(t, a, "orders")
	_, ops, err := ReadMetadataSnapshot(bytes.NewReader(snapshotOf(t, a)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ApplyOps(1, ops); err != nil {
		t.Fatal(err)
	}
	if err := a.ApplyOps(1, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := snapshotOf(t, b), snapshotOf(t, a); !bytes.Equal(got, want) {
		t.Fatal("stores differ after applying the same ops")
	}
	del := []Op{{Key: []byte(keyTopicPrefix + "orders")}}
	if err := b.ApplyOps(1, del); err != nil { // a replayed index: skipped
		t.Fatal(err)
	}
	if ts, _ := b.Topics(); len(ts) != 1 {
		t.Fatalf("a replayed entry was applied again: %+v", ts)
	}
	if err := b.ApplyOps(2, del); err != nil {
		t.Fatal(err)
	}
	if ts, _ := b.Topics(); len(ts) != 0 {
		t.Fatalf("topic not deleted: %+v", ts)
	}
	if i, err := b.MetadataApplied(); i != 2 || err != nil {
		t.Fatalf("applied index %d, %v; want 2", i, err)
	}
	before := snapshotOf(t, b)
	for _, bad := range [][]Op{
		{{Key: []byte(keyGroupOffsetPrefix + "x"), Value: []byte{formatV1}}},
		{{Key: []byte(keyClusterID), Value: []byte{formatV1}}},
		{{Key: []byte(keyTopicPrefix), Value: []byte{formatV1}}},
		{ops[0], {Key: []byte(keyTopicPrefix + "t"), Value: []byte{9}}},
	} {
		if err := b.ApplyOps(3, bad); err == nil {
			t.Fatalf("ApplyOps(%q) accepted", bad)
		}
	}
	if !bytes.Equal(snapshotOf(t, b), before) {
		t.Fatal("a refused ApplyOps changed the store")
	}
	if err := b.ApplyOps(3, []Op{{Key: []byte(keyGroupPrefix + "g"), Value: []byte{formatV1}}}); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("group key: %v", err)
	}
}

// A damaged snapshot is refused whole: every single-byte flip and every
// truncation.
func TestMetadataSnapshotDamaged(t *testing.T) {
	t.Parallel()
	a := openMem(t)
	replicatedFixture(t, a, "orders")
	snap := snapshotOf(t, a)
	for i := range snap {
		bad := bytes.Clone(snap)
		bad[i] ^= 0x40
		if _, _, err := ReadMetadataSnapshot(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
		if _, _, err := ReadMetadataSnapshot(bytes.NewReader(snap[:i])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", i, err)
		}
	}
}

// Each kind of record is classified; a mirror's ACL filter state is none.
func TestChangesOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key  string
		want Changes
	}{
		{keyTopicPrefix + "t", ChangedTopics}, {keyTopicIDPrefix + "x", ChangedTopics},
		{keyBrokerPrefix + "1", ChangedCluster}, {keyPartitionPrefix + "x", ChangedCluster},
		{keyACLPrefix + "a", ChangedACLs}, {keyQuotaPrefix + "q", ChangedQuotas},
		{keyBrokerConfigPrefix + "c", ChangedBrokerConfigs}, {keyNodeConfigPrefix + "1", ChangedBrokerConfigs},
		{keyMirrorPartitionPrefix + "m", ChangedMirrors}, {keyMirrorPrefix + "m", ChangedMirrors}, {keyMirrorACLPrefix + "m", 0},
	} {
		if got := ChangesOf([]Op{{Key: []byte(c.key)}}); got != c.want {
			t.Errorf("%s: %b, want %b", c.key, got, c.want)
		}
	}
	if ChangedAll&ChangedBrokerConfigs == 0 || ChangedAll&ChangedTopics == 0 || ChangedAll&ChangedMirrors == 0 {
		t.Fatalf("ChangedAll %b", ChangedAll)
	}
}
