package state

import (
	"errors"
	"testing"
)

// A mirror's record of the quotas its sync set: replaced per entity,
// forgotten with no values, kept apart from another mirror's, refused for
// a missing mirror, and deleted with the mirror's sync records.
func TestSyncedQuotas(t *testing.T) {
	t.Parallel()
	s := openWithMirror(t)
	if err := s.PutMirror(Mirror{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	alice := QuotaEntity{User: QuotaName{Set: true, Name: "alice"}}
	deflt := QuotaEntity{User: QuotaName{Set: true, Default: true}, ClientID: QuotaName{Set: true, Name: "app"}}
	if err := s.PutSyncedQuotas("m", []ClientQuota{
		{Entity: alice, Values: map[string]float64{"producer_byte_rate": 1024}},
		{Entity: deflt, Values: map[string]float64{"request_percentage": 50}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSyncedQuotas("other", []ClientQuota{{Entity: alice, Values: map[string]float64{"consumer_byte_rate": 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSyncedQuotas("m", []ClientQuota{{Entity: deflt}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SyncedQuotas("m")
	if err != nil || len(got) != 1 || got[0].Entity != alice || got[0].Values["producer_byte_rate"] != 1024 {
		t.Fatalf("record of m: %+v %v", got, err)
	}
	if err := s.PutSyncedQuotas("gone", []ClientQuota{{Entity: alice, Values: map[string]float64{"x": 1}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("record for a missing mirror: %v", err)
	}
	if err := s.DeleteMirrorSync("m"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SyncedQuotas("m"); err != nil || len(got) != 0 {
		t.Fatalf("record of m after DeleteMirrorSync: %+v %v", got, err)
	}
	if got, err := s.SyncedQuotas("other"); err != nil || len(got) != 1 {
		t.Fatalf("record of another mirror after DeleteMirrorSync(m): %+v %v", got, err)
	}
}
