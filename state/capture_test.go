package state

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// loopback is a replicator that applies each entry to the store at once,
// as a one-voter metadata log does, and keeps the entries.
type loopback struct {
	s       *Store
	mu      sync.Mutex
	entries [][]Op
	fail    error
}

func (l *loopback) Replicate(ops []Op) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	l.entries = append(l.entries, ops)
	return l.s.ApplyOps(uint64(len(l.entries)), ops)
}

func (l *loopback) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Every write method under a replicator: those of replicated records
// become entries (one per transaction), applied back to the store; those of a node's own
// records are committed here without an entry; none mixes the two.
func TestReplicatedWrites(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	l := &loopback{s: s}
	s.SetReplicator(l)
	tp := Topic{Name: "orders", ID: tid(1), Partitions: 2}
	acl := ACL{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:a", Host: "*", Operation: 3, Permission: 3}
	alice := SCRAMCredential{User: "alice", Mechanism: SCRAMSHA256, Iterations: 4096, Salt: []byte("s1"),
		StoredKey: []byte("k1"), ServerKey: []byte("v1")}
	quota := ClientQuota{Entity: QuotaEntity{User: QuotaName{Set: true, Name: "alice"}}, Values: map[string]float64{"producer_byte_rate": 1024}}
	state := aligning("orders", 0)
	for _, w := range []struct {
		name       string
		replicated bool
		write      func() error
	}{
		{"PutTopic", true, func() error { return s.PutTopic(tp) }},
		{"PutACLs", true, func() error { return s.PutACLs([]ACL{acl}) }},
		{"DeleteACLs", true, func() error { return s.DeleteACLs([]ACL{acl}) }},
		{"SetBrokerConfigs", true, func() error { return s.SetBrokerConfigs(map[string]string{"log.retention.ms": "1"}, nil) }},
		{"SetNodeConfigs", true, func() error { return s.SetNodeConfigs(1, map[string]string{"log.retention.ms": "2"}, nil) }},
		{"PutSCRAMCredentials", true, func() error { return s.PutSCRAMCredentials([]SCRAMCredential{alice}, nil) }},
		{"PutClientQuotas", true, func() error { return s.PutClientQuotas([]ClientQuota{quota}) }},
		{"AllocateProducerIDs", true, func() error { _, err := s.AllocateProducerIDs(1000); return err }},
		{"SkipProducerIDsThrough", true, func() error { return s.SkipProducerIDsThrough(5000) }},
		{"PutMirror", true, func() error {
			return s.PutMirror(Mirror{Name: "m", Topics: map[string]PartitionState{"orders": StateMirroring}})
		}},
		{"PutMirrorPartitionState", true, func() error { return s.PutMirrorPartitionState(state) }},
		{"PutMirrorSourceOffsets", true, func() error {
			return s.PutMirrorSourceOffsets("m", []MirrorSourceOffset{{Topic: "orders", Partition: 0, Offset: 9, Time: at(2000)}})
		}},
		{"PutSyncedACLs", true, func() error { return s.PutSyncedACLs("m", []ACL{acl}) }},
		{"PutLastGroupSync", true, func() error { return s.PutLastGroupSync("m", time.UnixMilli(5000)) }},
		{"CommitOffsets", false, func() error {
			return s.CommitOffsets("g", []GroupOffset{{Topic: "orders", Partition: 0, Offset: 3, LeaderEpoch: -1}})
		}},
		{"PutGroupMeta", false, func() error { return s.PutGroupMeta(GroupMeta{Group: "g", ProtocolType: "consumer", Generation: 1}) }},
		{"PutLeaderEpoch", false, func() error { _, err := s.PutLeaderEpoch(tid(1), 0, 4); return err }},
		{"PutTxn", false, func() error { return s.PutTxn(fullTxn("x")) }},
		{"DeleteTxn", false, func() error { return s.DeleteTxn("x") }},
		{"DeleteOffsets", false, func() error { return s.DeleteOffsets("g", "orders", []int32{0}) }},
		{"DeleteGroup", false, func() error { return s.DeleteGroup("g") }},
		{"DeleteLeaderEpochs", false, func() error { return s.DeleteLeaderEpochs(tid(1)) }},
		{"DeleteMirrorPartitionStates", true, func() error { return s.DeleteMirrorPartitionStates("m", "orders") }},
		{"DeleteMirrorSync", true, func() error { return s.DeleteMirrorSync("m") }},
		{"DeleteMirror", true, func() error { return s.DeleteMirror("m") }},
		{"DeleteTopic", true, func() error { return s.DeleteTopic("orders") }},
	} {
		before := l.count()
		if err := w.write(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		// A deletion in batches (DeleteMirrorSync: quotas, then ACLs) is
		// an entry per batch.
		if got := l.count() - before; w.replicated && got < 1 || !w.replicated && got != 0 {
			t.Errorf("%s: %d entries, want replicated=%v", w.name, got, w.replicated)
		}
	}
	if ts, _ := s.Topics(); len(ts) != 0 {
		t.Fatalf("topics left: %+v", ts)
	}
	// The entries alone rebuild the replicated records: applied to an
	// empty store, they leave the same snapshot.
	other := openMem(t)
	for i, ops := range l.entries {
		if err := other.ApplyOps(uint64(i+1), ops); err != nil {
			t.Fatal(err)
		}
	}
	var a, b bytes.Buffer
	if err := s.WriteMetadataSnapshot(&a); err != nil {
		t.Fatal(err)
	}
	if err := other.WriteMetadataSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("a store rebuilt from the entries differs")
	}
}

// A write the log refuses changes nothing and says why.
func TestReplicatedWriteRefused(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	s.SetReplicator(&loopback{s: s, fail: errors.New("no quorum")})
	if err := s.PutTopic(Topic{Name: "orders", ID: tid(1), Partitions: 1}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("no quorum")) {
		t.Fatalf("PutTopic: %v", err)
	}
	if _, err := s.Topic("orders"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused topic is stored: %v", err)
	}
	if err := s.CommitOffsets("g", []GroupOffset{{Topic: "t", Partition: 0, Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatalf("a node's own write needs no log: %v", err)
	}
}

// Concurrent read-modify-write changes through the log lose nothing:
// each is computed from the records the previous one left.
func TestReplicatedWritesConcurrent(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	s.SetReplicator(&loopback{s: s})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			errs <- s.PutACLs([]ACL{{ResourceType: 2, ResourceName: fmt.Sprintf("t%d", i), PatternType: 3,
				Principal: "User:a", Host: "*", Operation: 3, Permission: 3}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if acls, err := s.ACLs(); err != nil || len(acls) != 16 {
		t.Fatalf("%d ACLs, %v; want 16", len(acls), err)
	}
	first, err := s.AllocateProducerIDs(10)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.AllocateProducerIDs(10)
	if err != nil || second != first+10 {
		t.Fatalf("producer id blocks %d then %d, %v", first, second, err)
	}
}
