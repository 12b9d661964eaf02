package group

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sameJSON compares described groups by value (their strings are
// pointers).
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// reloaded is a second coordinator that loads every group from the
// records c's store wrote, as the next leader of the partition does.
func reloaded(t *testing.T, store *memStore, tt *testTopics) *Coordinator {
	t.Helper()
	c := newCoordinator(t, newMemStore(), Config{ConsumerProtocol: true, Topics: tt.all})
	c.Load(func(string) bool { return true }, store.replay(t))
	return c
}

func newStoredConsumerCoordinator(t *testing.T) (*Coordinator, *memStore, *testTopics) {
	tt := &testTopics{}
	tt.set("orders", 1, 4)
	store := newMemStore()
	return newCoordinator(t, store, Config{ConsumerProtocol: true, Topics: tt.all}), store, tt
}

// A coordinator that loads the group's records serves its members as they
// were: same epochs, same assignments, a revocation still pending, and no
// one rejoins.
func TestConsumerGroupLoadsWithoutARebalance(t *testing.T) {
	t.Parallel()
	c, store, tt := newStoredConsumerCoordinator(t)
	inst := "pod-1"
	m1, m2 := newCGMember(t, c, "g", "m1", "orders"), newCGMember(t, c, "g", "m2", "orders")
	m2.instance = &inst
	m1.join()
	m2.join()
	m1.heartbeat() // told to revoke two; it has not said it did
	before := describeCG(t, c, "g")

	c2 := reloaded(t, store, tt)
	after := describeCG(t, c2, "g")
	if !sameJSON(after, before) {
		t.Fatalf("after the load:\n%+v\nbefore:\n%+v", after, before)
	}
	for _, m := range []*cgMember{m1, m2} {
		m.c = c2
	}
	// m2 still gets nothing until m1 revokes; then the hand-over ends as
	// it would have on the first coordinator.
	m2.heartbeat()
	checkNoneShared(t, m1, m2)
	if len(m2.ownedOf(topicID(1))) != 0 {
		t.Fatalf("m2 owns %v while m1 has not revoked", m2.owned)
	}
	if m1.heartbeat(); m1.epoch != 2 {
		t.Fatalf("m1 at epoch %d after revoking on the new coordinator, want 2", m1.epoch)
	}
	m2.heartbeat()
	checkNoneShared(t, m1, m2)
	if g := describeCG(t, c2, "g"); g.State != "Stable" || g.Epoch != 2 || len(m2.ownedOf(topicID(1))) != 2 {
		t.Fatalf("state %s at epoch %d, m2 owning %v; want Stable at 2 with two", g.State, g.Epoch, m2.owned)
	}
	// The static member's instance is known to the new coordinator.
	impostor := newCGMember(t, c2, "g", "m9", "orders")
	impostor.instance = &inst
	wantCode(t, "a second member of the loaded instance", impostor.send(impostor.request(joinEpoch)).ErrorCode,
		kerr.UnreleasedInstanceID)
}

// Members that left, and groups deleted or turned classic, are gone after
// a load too.
func TestConsumerGroupLoadForgetsWhatEnded(t *testing.T) {
	t.Parallel()
	c, store, tt := newStoredConsumerCoordinator(t)
	m1, m2 := newCGMember(t, c, "g", "m1", "orders"), newCGMember(t, c, "g", "m2", "orders")
	m1.join()
	m2.join()
	m2.send(m2.request(leaveEpoch))
	if g := describeCG(t, reloaded(t, store, tt), "g"); len(g.Members) != 1 || g.Members[0].MemberID != "m1" || g.Epoch != 3 {
		t.Fatalf("after m2 left: %+v", g)
	}
	m1.send(m1.request(leaveEpoch))
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g"}
	wantCode(t, "deleting the empty group", c.DeleteGroups(req).Groups[0].ErrorCode, nil)
	if g := describeCG(t, reloaded(t, store, tt), "g"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("a deleted group after a load: %+v", g)
	}

	m3 := newCGMember(t, c, "h", "m3", "orders")
	m3.join()
	m3.send(m3.request(leaveEpoch))
	classic := newClient(t, c, "h", "classic")
	form(t, classic)
	if g := describeCG(t, reloaded(t, store, tt), "h"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("a group turned classic, after a load: %+v", g)
	}
}

// Topics that changed while the group moved give it a new target.
func TestConsumerGroupLoadSeesNewPartitions(t *testing.T) {
	t.Parallel()
	c, store, tt := newStoredConsumerCoordinator(t)
	m := newCGMember(t, c, "g", "m1", "orders")
	m.join()
	tt.set("orders", 1, 6)
	m.c = reloaded(t, store, tt)
	if m.heartbeat(); m.epoch != 2 || len(m.ownedOf(topicID(1))) != 6 {
		t.Fatalf("after the load: epoch %d owning %v, want 2 owning six", m.epoch, m.owned)
	}
}

// A heartbeat whose records cannot be written is answered with the
// store's error, and tells the member nothing; the next write that
// succeeds carries them, so the log ends as the memory.
func TestConsumerGroupAnswersOnlyWhatIsWritten(t *testing.T) {
	t.Parallel()
	c, store, tt := newStoredConsumerCoordinator(t)
	m := newCGMember(t, c, "g", "m1", "orders")
	store.failAppends = errors.New("disk full")
	resp := m.send(m.request(joinEpoch))
	wantCode(t, "a join that could not be written", resp.ErrorCode, kerr.CoordinatorNotAvailable)
	if resp.Assignment != nil || len(m.owned) != 0 {
		t.Fatalf("the failed join told the member %+v", resp.Assignment)
	}
	store.failAppends = nil
	m.join()
	if len(m.ownedOf(topicID(1))) != 4 {
		t.Fatalf("owned %v after the retried join", m.owned)
	}
	before := describeCG(t, c, "g")
	if after := describeCG(t, reloaded(t, store, tt), "g"); !sameJSON(after, before) {
		t.Fatalf("the log after the retry:\n%+v\nthe memory:\n%+v", after, before)
	}
}

// A member whose session ends after a load is removed as any other.
func TestConsumerGroupLoadedMembersExpire(t *testing.T) {
	t.Parallel()
	tt := &testTopics{}
	tt.set("orders", 1, 4)
	store := newMemStore()
	c := newCoordinator(t, store, Config{ConsumerProtocol: true, Topics: tt.all})
	newCGMember(t, c, "g", "m1", "orders").join()
	c2 := newCoordinator(t, newMemStore(), Config{ConsumerProtocol: true, Topics: tt.all,
		ConsumerSessionTimeout: 50 * time.Millisecond})
	c2.Load(func(string) bool { return true }, store.replay(t))
	deadline := time.Now().Add(waitFor)
	for describeCG(t, c2, "g").State != "Empty" {
		if time.Now().After(deadline) {
			t.Fatalf("the loaded member never expired: %+v", describeCG(t, c2, "g"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
