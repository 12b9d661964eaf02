package group

import (
	"fmt"
	"testing"
)

var tA = topicID(1)

func nobodyHolds(TopicID, int32) bool { return false }

func TestReconcileStableTakesFreePartitions(t *testing.T) {
	t.Parallel()
	m := reconciliation{epoch: 3, state: memberStable, assigned: Assignment{tA: {0}}}
	got := m.reconcile(5, Assignment{tA: {0, 1, 2}}, nobodyHolds, nil)
	if got.state != memberStable || got.epoch != 5 || got.previousEpoch != 3 || fmt.Sprint(got.assigned) != fmt.Sprint(Assignment{tA: {0, 1, 2}}) {
		t.Fatalf("got %+v, want STABLE at epoch 5 (previous 3) with [0 1 2]", got)
	}
	if again := got.reconcile(5, Assignment{tA: {0, 1, 2}}, nobodyHolds, nil); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Fatalf("a stable member at the target's epoch changed: %+v -> %+v", got, again)
	}
}

// A member losing a partition keeps its epoch and gets nothing new until
// its heartbeat no longer lists the partition; a new partition still held
// by another member waits for its release.
func TestReconcileRevokesBeforeItAssigns(t *testing.T) {
	t.Parallel()
	m := reconciliation{epoch: 4, state: memberStable, assigned: Assignment{tA: {0, 1}}}
	target := Assignment{tA: {0, 5}}
	heldByOther := func(_ TopicID, p int32) bool { return p == 5 }

	got := m.reconcile(6, target, heldByOther, nil)
	if got.state != memberUnrevoked || got.epoch != 4 || fmt.Sprint(got.assigned) != fmt.Sprint(Assignment{tA: {0}}) ||
		fmt.Sprint(got.revoking) != fmt.Sprint(Assignment{tA: {1}}) {
		t.Fatalf("got %+v, want UNREVOKED at epoch 4, assigned [0], revoking [1]", got)
	}
	// Still owns 1: nothing moves.
	if still := got.reconcile(6, target, heldByOther, Assignment{tA: {0, 1}}); still.state != memberUnrevoked || still.epoch != 4 {
		t.Fatalf("member still owning its revoked partition moved on: %+v", still)
	}
	// Revoked: the epoch moves, 5 is still held elsewhere.
	got = got.reconcile(6, target, heldByOther, Assignment{tA: {0}})
	if got.state != memberUnreleased || got.epoch != 6 || got.previousEpoch != 4 || fmt.Sprint(got.assigned) != fmt.Sprint(Assignment{tA: {0}}) {
		t.Fatalf("got %+v, want UNRELEASED at epoch 6 (previous 4) with [0]", got)
	}
	// Released: 5 is the member's.
	got = got.reconcile(6, target, nobodyHolds, Assignment{tA: {0}})
	if got.state != memberStable || got.epoch != 6 || fmt.Sprint(got.assigned) != fmt.Sprint(target) {
		t.Fatalf("got %+v, want STABLE at epoch 6 with %v", got, target)
	}
}

// A member that already let go of a partition its target dropped (its
// heartbeat does not list it) goes straight to the new epoch.
func TestReconcileSkipsARevocationAlreadyDone(t *testing.T) {
	t.Parallel()
	m := reconciliation{epoch: 2, state: memberStable, assigned: Assignment{tA: {0, 1}}}
	got := m.reconcile(3, Assignment{tA: {0}}, nobodyHolds, Assignment{tA: {0}})
	if got.state != memberStable || got.epoch != 3 || fmt.Sprint(got.assigned) != fmt.Sprint(Assignment{tA: {0}}) {
		t.Fatalf("got %+v, want STABLE at epoch 3 with [0]", got)
	}
}

// Two members swapping partitions, heartbeating in every order: a
// partition is never assigned to both at once, and both end stable on the
// new target.
func TestReconcileNeverAssignsAPartitionTwice(t *testing.T) {
	t.Parallel()
	targets := map[string]Assignment{"a": {tA: {2, 3}}, "b": {tA: {0, 1}}}
	for _, order := range []string{"abab", "baba", "aabb", "bbaa", "abba"} {
		ms := map[string]reconciliation{
			"a": {epoch: 1, state: memberStable, assigned: Assignment{tA: {0, 1}}},
			"b": {epoch: 1, state: memberStable, assigned: Assignment{tA: {2, 3}}},
		}
		for step := 0; step < 6; step++ {
			id := string(order[step%len(order)])
			other := map[string]string{"a": "b", "b": "a"}[id]
			o := ms[other]
			held := func(topic TopicID, p int32) bool {
				for _, set := range []Assignment{o.assigned, o.revoking} {
					for _, q := range set[topic] {
						if q == p {
							return true
						}
					}
				}
				return false
			}
			// The member heartbeats with what it consumes: its assigned
			// partitions (it drops revoked ones at once).
			ms[id] = ms[id].reconcile(2, targets[id], held, ms[id].assigned)
			// A member consumes what it is assigned and what it has
			// not revoked yet; the other may not be assigned any of it.
			for x, y := range map[string]string{"a": "b", "b": "a"} {
				holds := append(append([]int32{}, ms[x].assigned[tA]...), ms[x].revoking[tA]...)
				for _, p := range holds {
					for _, q := range ms[y].assigned[tA] {
						if p == q {
							t.Fatalf("order %s step %d: partition %d held by %s and assigned to %s: %+v", order, step, p, x, y, ms)
						}
					}
				}
			}
		}
		for id, m := range ms {
			if m.state != memberStable || m.epoch != 2 || fmt.Sprint(m.assigned) != fmt.Sprint(targets[id]) {
				t.Errorf("order %s: %s ended %+v, want STABLE at epoch 2 with %v", order, id, m, targets[id])
			}
		}
	}
}
