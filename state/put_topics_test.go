package state

import (
	"errors"
	"testing"
)

func TestPutTopics(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	a := Topic{Name: "a", ID: tid(1), Partitions: 3, Mirror: "east"}
	b := Topic{Name: "b", ID: tid(2), Partitions: 1, Mirror: "east"}
	if err := s.PutTopics([]Topic{a, b}); err != nil {
		t.Fatal(err)
	}
	mustTopic(t, s, a)
	mustTopic(t, s, b)

	// Released together, as a failover does.
	a.Mirror, b.Mirror = "", ""
	if err := s.PutTopics([]Topic{a, b}); err != nil {
		t.Fatal(err)
	}
	mustTopic(t, s, a)
	mustTopic(t, s, b)

	// One invalid topic: nothing is written.
	c := Topic{Name: "c", ID: tid(3), Partitions: 1}
	if err := s.PutTopics([]Topic{c, {Name: "bad name", ID: tid(4), Partitions: 1}}); err == nil {
		t.Fatal("an invalid topic accepted")
	}
	if _, err := s.Topic("c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a topic of a refused PutTopics stored: %v", err)
	}

	// An id that belongs to another topic: the transaction is refused whole.
	if err := s.PutTopics([]Topic{c, {Name: "d", ID: tid(1), Partitions: 1}}); err == nil {
		t.Fatal("a second topic with a's id accepted")
	}
	if _, err := s.Topic("c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a topic of a refused PutTopics stored: %v", err)
	}
	mustTopic(t, s, a)
}
