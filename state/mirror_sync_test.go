package state

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// The synced-binding record is per mirror: one mirror's record never
// shows in another's (not even one whose name extends it), forgetting
// touches neither the other mirror nor the bindings themselves, and
// deleting the mirror's sync record leaves the mirror and the ACLs.
func TestSyncedACLs(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	for _, name := range []string{"m", "m.b", "n"} {
		if err := s.PutMirror(Mirror{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := readACL("orders", "User:alice"), readACL("orders", "User:bob"),
		ACL{ResourceType: tTopic, ResourceName: "ord/ers", PatternType: pPrefixed, Principal: "User:a/b",
			Host: "10.0.0.1", Operation: opWrite, Permission: permDeny}
	if err := s.PutACLs([]ACL{a, b, c}); err != nil {
		t.Fatal(err)
	}
	must := func(mirror string, want ...ACL) {
		t.Helper()
		got, err := s.SyncedACLs(mirror)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(want, CompareACLs)
		if !slices.Equal(got, want) {
			t.Fatalf("SyncedACLs(%s) = %v\nwant %v", mirror, got, want)
		}
	}
	must("m")
	if err := s.PutSyncedACLs("m", []ACL{c, a, a}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSyncedACLs("m.b", []ACL{b}); err != nil {
		t.Fatal(err)
	}
	must("m", a, c)
	must("m.b", b)
	must("n")

	if err := s.DeleteSyncedACLs("m", []ACL{a, b, {}}); err != nil {
		t.Fatal(err)
	}
	must("m", c)
	must("m.b", b)
	mustACLs(t, s, a, b, c)

	if err := s.PutLastGroupSync("m", time.UnixMilli(1234567)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMirrorSync("m"); err != nil {
		t.Fatal(err)
	}
	must("m")
	must("m.b", b)
	if at, err := s.LastGroupSync("m"); err != nil || !at.IsZero() {
		t.Fatalf("LastGroupSync after DeleteMirrorSync: %v, %v", at, err)
	}
	if _, err := s.GetMirror("m"); err != nil {
		t.Fatalf("DeleteMirrorSync deleted the mirror: %v", err)
	}
	mustACLs(t, s, a, b, c)
}

// Records need their mirror, and invalid input is refused before any write.
func TestSyncedACLsRefused(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.PutSyncedACLs("gone", []ACL{readACL("t", "User:a")}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("PutSyncedACLs without the mirror: %v, want ErrNotFound", err)
	}
	if err := s.PutLastGroupSync("gone", time.Now()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("PutLastGroupSync without the mirror: %v, want ErrNotFound", err)
	}
	if err := s.PutMirror(Mirror{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	bad := readACL("t", "User:a")
	bad.PatternType = pAny
	if err := s.PutSyncedACLs("m", []ACL{readACL("t", "User:b"), bad}); err == nil {
		t.Fatal("PutSyncedACLs took a binding of pattern ANY")
	}
	if got, _ := s.SyncedACLs("m"); len(got) != 0 {
		t.Fatalf("a refused call stored %v", got)
	}
	if err := s.PutLastGroupSync("m", time.Unix(0, 0)); err == nil {
		t.Fatal("PutLastGroupSync took the Unix epoch, which reads back as never")
	}
	for _, name := range []string{"", "a/b", ".."} {
		if _, err := s.SyncedACLs(name); err == nil {
			t.Errorf("SyncedACLs(%q) took an invalid mirror name", name)
		}
		if err := s.DeleteMirrorSync(name); err == nil {
			t.Errorf("DeleteMirrorSync(%q) took an invalid mirror name", name)
		}
	}
}

// The last group sync survives a restart at millisecond precision.
func TestLastGroupSyncPersists(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	if err := s.PutMirror(Mirror{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)
	if err := s.PutLastGroupSync("m", at); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSyncedACLs("m", []ACL{readACL("t", "User:a")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir)
	defer s.Close()
	got, err := s.LastGroupSync("m")
	if err != nil || !got.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("LastGroupSync after a restart: %v, %v; want %v", got, err, at.Truncate(time.Millisecond))
	}
	if acls, err := s.SyncedACLs("m"); err != nil || len(acls) != 1 {
		t.Fatalf("SyncedACLs after a restart: %v, %v", acls, err)
	}
}
