package meta

import (
	"fmt"
	"testing"

	"github.com/kmirror/kmirror/state"
)

func twoBrokers() *Image {
	bd := NewBuilder("c1", 1, 2)
	bd.AddBroker(Broker{ID: 2, Listeners: []Listener{{Name: "PLAINTEXT", Host: "h2", Port: 9092}}})
	bd.AddBroker(Broker{ID: 1, Listeners: []Listener{{Name: "PLAINTEXT", Host: "h1", Port: 9092}, {Name: "SSL", Host: "h1", Port: 9093}}})
	bd.AddTopic(&Topic{Name: "b", ID: [16]byte{2}, Partitions: []Partition{
		{Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
		{Leader: 2, LeaderEpoch: 5, Replicas: []int32{2, 1}, ISR: []int32{2}},
	}})
	bd.AddTopic(&Topic{Name: "a", ID: [16]byte{1}, Partitions: []Partition{{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}})
	return bd.Build()
}

func TestImageLookups(t *testing.T) {
	t.Parallel()
	im := twoBrokers()
	if im.ClusterID() != "c1" || im.Controller() != 2 || im.Self() != 1 {
		t.Fatalf("cluster %q controller %d self %d", im.ClusterID(), im.Controller(), im.Self())
	}
	if bs := im.Brokers(); len(bs) != 2 || bs[0].ID != 1 || bs[1].ID != 2 {
		t.Fatalf("brokers %+v, want 1 then 2", bs)
	}
	if im.Broker(3) != nil || im.Broker(2).Listeners[0].Host != "h2" {
		t.Fatal("Broker lookup")
	}
	if l, _ := im.Broker(1).Listener("SSL"); l.Port != 9093 {
		t.Fatalf("SSL listener %+v", l)
	}
	if l, _ := im.Broker(1).Listener("OTHER"); l.Port != 9092 {
		t.Fatalf("default listener %+v", l)
	}
	if _, ok := (&Broker{}).Listener("x"); ok {
		t.Fatal("a broker without listeners has one")
	}
	if n := im.TopicNames(); len(n) != 2 || n[0] != "a" || n[1] != "b" {
		t.Fatalf("names %v", n)
	}
	if p := im.Partition("b", 1); p == nil || p.Leader != 2 || p.LeaderEpoch != 5 {
		t.Fatalf("b-1 %+v", p)
	}
	for _, c := range []struct {
		topic string
		p     int32
	}{{"b", 2}, {"b", -1}, {"nope", 0}} {
		if im.Partition(c.topic, c.p) != nil {
			t.Fatalf("%s-%d exists", c.topic, c.p)
		}
	}
	if im.TopicByID([16]byte{1}).Name != "a" || im.TopicByID([16]byte{9}) != nil {
		t.Fatal("TopicByID")
	}
}

func TestCoordinator(t *testing.T) {
	t.Parallel()
	// No coordinator topic: a node alone coordinates every key; in a
	// cluster the key hashes over the brokers, the same on every node.
	alone := NewBuilder("c1", 1, 1).AddBroker(Broker{ID: 1}).Build()
	if b, ok := alone.Coordinator(CoordinatorGroup, "g"); !ok || b.ID != 1 {
		t.Fatalf("group coordinator %+v %v, want 1", b, ok)
	}
	// "txn".hashCode() = 115306, even: broker 1 of [1 2]; "txn1" 3574535, odd: broker 2.
	for self := int32(1); self <= 2; self++ {
		im := NewBuilder("c1", self, 1).AddBroker(Broker{ID: 2}).AddBroker(Broker{ID: 1}).Build()
		for key, want := range map[string]int32{"txn": 1, "txn1": 2} {
			if b, ok := im.Coordinator(CoordinatorGroup, key); !ok || b.ID != want {
				t.Fatalf("node %d: coordinator of %q without the topic: %+v %v, want %d", self, key, b, ok, want)
			}
		}
	}
	bd := NewBuilder("c1", 1, 1)
	bd.AddBroker(Broker{ID: 1}).AddBroker(Broker{ID: 2})
	parts := make([]Partition, 50)
	for i := range parts {
		parts[i].Leader = int32(1 + i%2)
	}
	bd.AddTopic(&Topic{Name: TransactionTopic, Partitions: parts})
	im := bd.Build()
	// "txn".hashCode() = 115306 (Java); % 50 = 6, led by 1.
	// "txn1".hashCode() = 3574535; % 50 = 35, led by 2.
	for key, want := range map[string]int32{"txn": 1, "txn1": 2} {
		if b, ok := im.Coordinator(CoordinatorTransaction, key); !ok || b.ID != want {
			t.Fatalf("coordinator of %q: %+v %v, want %d", key, b, ok, want)
		}
	}
	parts[35].Leader = 7 // not a broker
	if _, ok := im.Coordinator(CoordinatorTransaction, "txn1"); ok {
		t.Fatal("a coordinator that is not a broker")
	}
}

func TestPartitionFor(t *testing.T) {
	t.Parallel()
	// abs(Java's String.hashCode()), with n above every hash; the modulo
	// is TestCoordinator's.
	for key, want := range map[string]int{
		"":    0,
		"txn": 115306,
		// Its hashCode() is Integer.MIN_VALUE: Utils.abs makes it 0.
		"polygenelubricants": 0,
		// A negative hash, -1910022912.
		"zzzzzzzz": 1910022912,
		// U+1F600 is a surrogate pair in Java.
		"\U0001F600": 1772899,
	} {
		if got := partitionFor(key, 1<<31-1); got != want {
			t.Errorf("partitionFor(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestLookupsAllocateNothing(t *testing.T) {
	im := twoBrokers()
	if n := testing.AllocsPerRun(100, func() {
		_ = im.Partition("b", 1)
		_ = im.Broker(2)
		_, _ = im.Coordinator(CoordinatorGroup, "g")
	}); n != 0 {
		t.Fatalf("lookups allocate %v times", n)
	}
}

func TestWithLeaderEpoch(t *testing.T) {
	t.Parallel()
	im := twoBrokers()
	next := im.WithLeaderEpoch("b", 1, 9)
	if got := next.Partition("b", 1).LeaderEpoch; got != 9 {
		t.Fatalf("new epoch %d, want 9", got)
	}
	if got := im.Partition("b", 1).LeaderEpoch; got != 5 {
		t.Fatalf("the old image changed: epoch %d, want 5", got)
	}
	if next.TopicByID([16]byte{2}).Partitions[1].LeaderEpoch != 9 || next.Topic("a") != im.Topic("a") {
		t.Fatal("the copy's indexes")
	}
	if im.WithLeaderEpoch("b", 2, 1) != im || im.WithLeaderEpoch("zz", 0, 1) != im {
		t.Fatal("a missing partition copied the image")
	}
}

// Without the coordinator topics a key hashes over every registered
// broker: fencing one moves none of the others' keys, and its own have
// no coordinator until it is back.
func TestCoordinatorStaysWhenABrokerIsFenced(t *testing.T) {
	t.Parallel()
	regs := []state.BrokerRegistration{{ID: 1}, {ID: 2}, {ID: 3}}
	all := ImageFromRecords("c", 1, 1, regs, nil, nil, nil)
	regs[1].Fenced = true
	fenced := ImageFromRecords("c", 1, 1, regs, nil, nil, nil)
	for i := range 100 {
		key := fmt.Sprintf("group-%d", i)
		before, ok := all.Coordinator(CoordinatorGroup, key)
		if !ok {
			t.Fatalf("%s: no coordinator with every broker up", key)
		}
		after, ok := fenced.Coordinator(CoordinatorGroup, key)
		switch {
		case before.ID == 2 && ok:
			t.Fatalf("%s: coordinated by %d while its coordinator 2 is fenced", key, after.ID)
		case before.ID != 2 && (!ok || after.ID != before.ID):
			t.Fatalf("%s: moved from %d to %+v when broker 2 was fenced", key, before.ID, after)
		}
	}
}
