package state

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// off makes a committed offset with the fields most tests do not care about
// set to plain values.
func off(topic string, partition int32, offset int64) GroupOffset {
	return GroupOffset{Topic: topic, Partition: partition, Offset: offset, LeaderEpoch: -1, CommitTimestamp: 1700000000000}
}

func mustCommit(t testing.TB, s *Store, group string, offs ...GroupOffset) {
	t.Helper()
	if err := s.CommitOffsets(group, offs); err != nil {
		t.Fatalf("CommitOffsets(%q): %v", group, err)
	}
}

func mustOffsets(t *testing.T, s *Store, group string, want []GroupOffset) {
	t.Helper()
	got, err := s.GroupOffsets(group)
	if err != nil {
		t.Fatalf("GroupOffsets(%q): %v", group, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("GroupOffsets(%q) =\n%+v\nwant\n%+v", group, got, want)
	}
}

func mustGroups(t *testing.T, s *Store, want []GroupMeta) {
	t.Helper()
	got, err := s.Groups()
	if err != nil {
		t.Fatalf("Groups(): %v", err)
	}
	if !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 { // nil and empty alike
		t.Fatalf("Groups() =\n%+v\nwant\n%+v", got, want)
	}
}

type groupCommit struct {
	group string
	offs  []GroupOffset
}

func TestCommitOffsets(t *testing.T) {
	t.Parallel()
	full := GroupOffset{Topic: "orders", Partition: 7, Offset: 1<<63 - 1, LeaderEpoch: 1<<31 - 1,
		Metadata: "gen=3 \x00\xff/\n", CommitTimestamp: 1<<63 - 1}
	for _, tc := range []struct {
		name    string
		commits []groupCommit
		want    map[string][]GroupOffset
	}{
		{
			name:    "round trip of every field",
			commits: []groupCommit{{"g", []GroupOffset{full}}},
			want:    map[string][]GroupOffset{"g": {full}},
		},
		{
			name: "edge values",
			commits: []groupCommit{{"g", []GroupOffset{
				{Topic: "t", Partition: 0, Offset: -1, LeaderEpoch: -1},
				{Topic: "t", Partition: 1<<31 - 1, Offset: 0, LeaderEpoch: 0, Metadata: strings.Repeat("m", 4096)},
			}}},
			want: map[string][]GroupOffset{"g": {
				{Topic: "t", Partition: 0, Offset: -1, LeaderEpoch: -1},
				{Topic: "t", Partition: 1<<31 - 1, Offset: 0, LeaderEpoch: 0, Metadata: strings.Repeat("m", 4096)},
			}},
		},
		{
			name: "overwrite replaces only the partitions committed",
			commits: []groupCommit{
				{"g", []GroupOffset{off("t", 0, 10), off("t", 1, 20), off("u", 0, 30)}},
				{"g", []GroupOffset{{Topic: "t", Partition: 1, Offset: 25, LeaderEpoch: 4, Metadata: "x", CommitTimestamp: 5}}},
			},
			want: map[string][]GroupOffset{"g": {
				off("t", 0, 10),
				{Topic: "t", Partition: 1, Offset: 25, LeaderEpoch: 4, Metadata: "x", CommitTimestamp: 5},
				off("u", 0, 30),
			}},
		},
		{
			name:    "later entry for a partition wins within a commit",
			commits: []groupCommit{{"g", []GroupOffset{off("t", 0, 1), off("t", 0, 2)}}},
			want:    map[string][]GroupOffset{"g": {off("t", 0, 2)}},
		},
		{
			// Keys order topics by length first ("b" before "aa") and
			// partitions numerically; the result is by name, then number.
			name: "sorted by topic then partition",
			commits: []groupCommit{{"g", []GroupOffset{
				off("b", 0, 1), off("aa", 300, 2), off("aa", 2, 3), off("B", 1, 4),
				off("a", 256, 5), off("a", 1, 6), off("a.b", 0, 7), off("a-b", 0, 8),
			}}},
			want: map[string][]GroupOffset{"g": {
				off("B", 1, 4), off("a", 1, 6), off("a", 256, 5), off("a-b", 0, 8),
				off("a.b", 0, 7), off("aa", 2, 3), off("aa", 300, 2), off("b", 0, 1),
			}},
		},
		{
			name:    "empty commit writes nothing",
			commits: []groupCommit{{"g", nil}},
			want:    map[string][]GroupOffset{"g": nil},
		},
		{
			name: "groups are independent",
			commits: []groupCommit{
				{"g1", []GroupOffset{off("t", 0, 1)}},
				{"g2", []GroupOffset{off("t", 0, 2)}},
			},
			want: map[string][]GroupOffset{"g1": {off("t", 0, 1)}, "g2": {off("t", 0, 2)}, "g3": nil},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			for _, c := range tc.commits {
				mustCommit(t, s, c.group, c.offs...)
			}
			for g, want := range tc.want {
				mustOffsets(t, s, g, want)
			}
		})
	}
}

// TestGroupPrefixSafety: groups whose names extend one another, contain
// NUL, '/' or bytes that look like a uvarint never see each other's offsets
// and are deleted one at a time.
func TestGroupPrefixSafety(t *testing.T) {
	t.Parallel()
	groups := []string{
		"a", "a\x00b", "ab", "a/", "a\x00", "\x00", "/", "\x01a", "\x80", "\xff",
		strings.Repeat("a", 127), strings.Repeat("a", 128), "\x01" + strings.Repeat("a", 127),
		strings.Repeat("\xff", maxGroupNameLen),
	}
	s := openMem(t)
	for i, g := range groups {
		// Each group commits to the same topics, with its index as offset.
		mustCommit(t, s, g, off("t", 0, int64(i)), off("t", 1, int64(i)), off("tt", 0, int64(i)))
	}
	if err := s.PutGroupMeta(GroupMeta{Group: "a", ProtocolType: "consumer", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	check := func(deleted map[string]bool) {
		t.Helper()
		var want []GroupMeta
		for i, g := range groups {
			if deleted[g] {
				mustOffsets(t, s, g, nil)
				continue
			}
			mustOffsets(t, s, g, []GroupOffset{off("t", 0, int64(i)), off("t", 1, int64(i)), off("tt", 0, int64(i))})
			m := GroupMeta{Group: g}
			if g == "a" {
				m = GroupMeta{Group: "a", ProtocolType: "consumer", Generation: 1}
			}
			want = append(want, m)
		}
		slices.SortFunc(want, func(a, b GroupMeta) int { return strings.Compare(a.Group, b.Group) })
		mustGroups(t, s, want)
	}
	check(nil)
	deleted := map[string]bool{}
	for _, g := range []string{"a", "a\x00", strings.Repeat("a", 127)} {
		if err := s.DeleteGroup(g); err != nil {
			t.Fatal(err)
		}
		deleted[g] = true
		check(deleted)
	}
	if err := s.DeleteOffsets("ab", "t", []int32{0, 1}); err != nil {
		t.Fatal(err)
	}
	mustOffsets(t, s, "ab", []GroupOffset{off("tt", 0, 2)})
	mustOffsets(t, s, "a\x00b", []GroupOffset{off("t", 0, 1), off("t", 1, 1), off("tt", 0, 1)})
}

func TestDeleteOffsets(t *testing.T) {
	t.Parallel()
	initial := []GroupOffset{off("t", 0, 1), off("t", 1, 2), off("t", 2, 3), off("tt", 0, 4), off("u", 1, 5)}
	for _, tc := range []struct {
		name       string
		group      string
		topic      string
		partitions []int32
		want       []GroupOffset // of group "g"
	}{
		{"some partitions", "g", "t", []int32{0, 2}, []GroupOffset{off("t", 1, 2), off("tt", 0, 4), off("u", 1, 5)}},
		{"missing partitions ignored", "g", "t", []int32{1, 9, 1 << 30}, []GroupOffset{off("t", 0, 1), off("t", 2, 3), off("tt", 0, 4), off("u", 1, 5)}},
		{"unknown topic", "g", "x", []int32{0}, initial},
		{"no partitions", "g", "t", nil, initial},
		{"topic prefix untouched", "g", "t", []int32{0, 1, 2}, []GroupOffset{off("tt", 0, 4), off("u", 1, 5)}},
		{"other group", "h", "t", []int32{0, 1, 2}, initial},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			mustCommit(t, s, "g", initial...)
			mustCommit(t, s, "h", off("t", 0, 9))
			if err := s.DeleteOffsets(tc.group, tc.topic, tc.partitions); err != nil {
				t.Fatal(err)
			}
			mustOffsets(t, s, "g", tc.want)
		})
	}
}

func TestDeleteTopicOffsets(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	mustCommit(t, s, "g1", off("t", 0, 1), off("t", 1, 2), off("tt", 0, 3), off("u", 0, 4))
	mustCommit(t, s, "g2", off("t", 5, 5))
	mustCommit(t, s, "g2\x00", off("t", 0, 6), off("a", 0, 7))
	mustCommit(t, s, "g3", off("u", 0, 8))
	if err := s.PutGroupMeta(GroupMeta{Group: "g2", ProtocolType: "consumer", Generation: 3}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic string
		n     int
	}{{"t", 4}, {"t", 0}, {"nope", 0}} {
		n, err := s.DeleteTopicOffsets(tc.topic)
		if err != nil || n != tc.n {
			t.Fatalf("DeleteTopicOffsets(%q) = %d, %v; want %d", tc.topic, n, err, tc.n)
		}
	}
	mustOffsets(t, s, "g1", []GroupOffset{off("tt", 0, 3), off("u", 0, 4)})
	mustOffsets(t, s, "g2", nil)
	mustOffsets(t, s, "g2\x00", []GroupOffset{off("a", 0, 7)})
	mustOffsets(t, s, "g3", []GroupOffset{off("u", 0, 8)})
	// g2 keeps its meta although its offsets are gone.
	mustGroups(t, s, []GroupMeta{{Group: "g1"}, {Group: "g2", ProtocolType: "consumer", Generation: 3},
		{Group: "g2\x00"}, {Group: "g3"}})
	if n, err := s.DeleteTopicOffsets("u"); err != nil || n != 2 {
		t.Fatalf("DeleteTopicOffsets(u) = %d, %v", n, err)
	}
	// g3 had offsets only: it is gone.
	mustGroups(t, s, []GroupMeta{{Group: "g1"}, {Group: "g2", ProtocolType: "consumer", Generation: 3}, {Group: "g2\x00"}})
}

// bigGroups commits per offsets of topic t (and one of topic "keep") in
// each of groups, in commits of 1000.
func bigGroups(t *testing.T, s *Store, groups []string, per int) {
	t.Helper()
	for _, g := range groups {
		offs := make([]GroupOffset, 0, 1000)
		for p := range per {
			offs = append(offs, off("t", int32(p), int64(p)))
			if len(offs) == cap(offs) || p == per-1 {
				mustCommit(t, s, g, offs...)
				offs = offs[:0]
			}
		}
		mustCommit(t, s, g, off("keep", 0, 1))
	}
}

// TestDeleteManyOffsets: deletions larger than one transaction go in
// several, and finish.
func TestDeleteManyOffsets(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	per := int(s.db.MaxBatchCount()) + 100 // one group alone is too big for one transaction
	groups := []string{"g1", "g2", "g3"}
	bigGroups(t, s, groups, per)
	for _, g := range groups {
		if err := s.PutGroupMeta(GroupMeta{Group: g, ProtocolType: "consumer"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteGroup("g1"); err != nil {
		t.Fatal(err)
	}
	mustOffsets(t, s, "g1", nil)
	mustGroups(t, s, []GroupMeta{{Group: "g2", ProtocolType: "consumer"}, {Group: "g3", ProtocolType: "consumer"}})
	n, err := s.DeleteTopicOffsets("t")
	if err != nil || n != 2*per {
		t.Fatalf("DeleteTopicOffsets = %d, %v; want %d", n, err, 2*per)
	}
	for _, g := range groups[1:] {
		mustOffsets(t, s, g, []GroupOffset{off("keep", 0, 1)})
	}
}

func TestDeleteGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, s *Store)
		delete  string
		groups  []GroupMeta
		offsets map[string][]GroupOffset
	}{
		{
			name: "meta and offsets",
			setup: func(t *testing.T, s *Store) {
				mustCommit(t, s, "g", off("t", 0, 1), off("u", 3, 2))
				mustCommit(t, s, "h", off("t", 0, 3))
				if err := s.PutGroupMeta(GroupMeta{Group: "g", ProtocolType: "consumer", Generation: 9}); err != nil {
					t.Fatal(err)
				}
			},
			delete:  "g",
			groups:  []GroupMeta{{Group: "h"}},
			offsets: map[string][]GroupOffset{"g": nil, "h": {off("t", 0, 3)}},
		},
		{
			name: "meta only",
			setup: func(t *testing.T, s *Store) {
				if err := s.PutGroupMeta(GroupMeta{Group: "g", ProtocolType: "connect", Generation: 1}); err != nil {
					t.Fatal(err)
				}
			},
			delete: "g",
		},
		{
			name:    "unknown group is a no-op",
			setup:   func(t *testing.T, s *Store) { mustCommit(t, s, "h", off("t", 0, 3)) },
			delete:  "g",
			groups:  []GroupMeta{{Group: "h"}},
			offsets: map[string][]GroupOffset{"h": {off("t", 0, 3)}},
		},
		{
			// DeleteGroup reads no values: it removes corrupt records,
			// which is how a group is repaired.
			name: "corrupt records",
			setup: func(t *testing.T, s *Store) {
				mustCommit(t, s, "g", off("t", 0, 1))
				putRaw(t, s, string(groupKey("g")), []byte{7})
				putRaw(t, s, string(appendGroupOffsetKey(nil, groupOffsetKey{"g", "t", 0})), []byte{1, 2})
				putRaw(t, s, string(groupOffsetPrefix("g"))+"junk", appendGroupOffset(nil, off("", 0, 0)))
				mustCommit(t, s, "h", off("t", 0, 3))
			},
			delete:  "g",
			groups:  []GroupMeta{{Group: "h"}},
			offsets: map[string][]GroupOffset{"g": nil, "h": {off("t", 0, 3)}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			tc.setup(t, s)
			if err := s.DeleteGroup(tc.delete); err != nil {
				t.Fatal(err)
			}
			mustGroups(t, s, tc.groups)
			for g, want := range tc.offsets {
				mustOffsets(t, s, g, want)
			}
		})
	}
}

func TestGroups(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		metas   []GroupMeta
		commits []groupCommit
		want    []GroupMeta
	}{
		{name: "empty"},
		{
			name:  "meta only",
			metas: []GroupMeta{{Group: "g", ProtocolType: "consumer", Generation: 2}},
			want:  []GroupMeta{{Group: "g", ProtocolType: "consumer", Generation: 2}},
		},
		{
			name:    "offset-only groups",
			commits: []groupCommit{{"z", []GroupOffset{off("t", 0, 1), off("t", 1, 1), off("u", 0, 1)}}, {"a", []GroupOffset{off("t", 0, 1)}}},
			want:    []GroupMeta{{Group: "a"}, {Group: "z"}},
		},
		{
			name: "mixed, sorted by name, meta replaced",
			metas: []GroupMeta{
				{Group: "bb", ProtocolType: "consumer", Generation: 1},
				{Group: "c", ProtocolType: "", Generation: 0},
				{Group: "bb", ProtocolType: "connect", Generation: 5},
				{Group: "\x00", ProtocolType: "consumer", Generation: 1},
			},
			commits: []groupCommit{
				{"bb", []GroupOffset{off("t", 0, 1)}},
				{"a", []GroupOffset{off("t", 0, 1)}},
				{"d/e", []GroupOffset{off("t", 0, 1)}},
				{"empty", nil},
			},
			want: []GroupMeta{
				{Group: "\x00", ProtocolType: "consumer", Generation: 1},
				{Group: "a"},
				{Group: "bb", ProtocolType: "connect", Generation: 5},
				{Group: "c"},
				{Group: "d/e"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			for _, m := range tc.metas {
				if err := s.PutGroupMeta(m); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range tc.commits {
				mustCommit(t, s, c.group, c.offs...)
			}
			mustGroups(t, s, tc.want)
		})
	}
}

// TestGroupPersistence: offsets (no fsync) and metas (fsync) survive Close
// and Open on a real directory, since Close flushes.
func TestGroupPersistence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		metas []GroupMeta // fsynced path
		offs  []GroupOffset
	}{
		{name: "no-sync path only", offs: []GroupOffset{off("t", 0, 1), {Topic: "u", Partition: 3, Offset: 7, LeaderEpoch: 2, Metadata: "m", CommitTimestamp: 9}}},
		{name: "sync path only", metas: []GroupMeta{{Group: "g", ProtocolType: "consumer", Generation: 4}}},
		{name: "both", metas: []GroupMeta{{Group: "g", ProtocolType: "consumer", Generation: 4}}, offs: []GroupOffset{off("t", 0, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := openDir(t, dir)
			for _, m := range tc.metas {
				if err := s.PutGroupMeta(m); err != nil {
					t.Fatal(err)
				}
			}
			if tc.offs != nil {
				mustCommit(t, s, "g", tc.offs...)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openDir(t, dir)
			defer s.Close()
			want := tc.metas
			if len(want) == 0 {
				want = []GroupMeta{{Group: "g"}}
			}
			mustGroups(t, s, want)
			mustOffsets(t, s, "g", tc.offs)
		})
	}
}

// killChildEnv names the directory the child of TestCommitOffsetsSurviveKill
// writes to.
const killChildEnv = "KMIRROR_STATE_KILL_CHILD_DIR"

// killChildOffsets is what the child commits.
func killChildOffsets() []GroupOffset {
	offs := make([]GroupOffset, 100)
	for i := range offs {
		offs[i] = GroupOffset{Topic: "t", Partition: int32(i), Offset: int64(i) * 10, LeaderEpoch: 1, Metadata: "k", CommitTimestamp: 1}
	}
	return offs
}

// TestCommitOffsetsKillChild is the child process of
// TestCommitOffsetsSurviveKill; it does nothing in a normal run.
func TestCommitOffsetsKillChild(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("child process of TestCommitOffsetsSurviveKill")
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// One fsynced write first, then offsets committed one at a time
	// without fsync: the last commits are in no fsync at all.
	if err := s.PutGroupMeta(GroupMeta{Group: "g", ProtocolType: "consumer", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	for _, o := range killChildOffsets() {
		if err := s.CommitOffsets("g", []GroupOffset{o}); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("committed")
	// kill -9 of ourselves: no Close, no deferred functions, no flush.
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	select {} // the signal ends us
}

// TestCommitOffsetsSurviveKill: offsets committed without fsync survive
// kill -9 of the process (they are in the OS page cache), Kafka's guarantee.
func TestCommitOffsetsSurviveKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitOffsetsKillChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Exited() || !strings.Contains(string(out), "committed") {
		t.Fatalf("child: %v (want killed after committing), output:\n%s", err, out)
	}
	s := openDir(t, dir)
	defer s.Close()
	mustGroups(t, s, []GroupMeta{{Group: "g", ProtocolType: "consumer", Generation: 1}})
	mustOffsets(t, s, "g", killChildOffsets())
}

// TestSyncExclusion: an fsynced update runs alone (syncMu exclusive), an
// offset commit shares syncMu with other commits only.
func TestSyncExclusion(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	err := s.update(func(tx) error {
		if s.syncMu.TryRLock() {
			s.syncMu.RUnlock()
			return errors.New("a commit could run during update")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.updateNoSync(func(tx) error {
		if s.syncMu.TryLock() {
			s.syncMu.Unlock()
			return errors.New("update could run during updateNoSync")
		}
		if !s.syncMu.TryRLock() {
			return errors.New("commits exclude one another")
		}
		s.syncMu.RUnlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupsConcurrent: commits, meta writes, reads and deletions at once
// keep the store consistent (run with -race).
func TestGroupsConcurrent(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	const goroutines, commits = 8, 200
	var wg sync.WaitGroup
	var failed atomic.Bool
	fail := func(err error) {
		if err != nil && !failed.Swap(true) {
			t.Error(err)
		}
	}
	for g := range goroutines {
		group := fmt.Sprintf("g%d", g)
		wg.Go(func() {
			for i := range commits {
				fail(s.CommitOffsets(group, []GroupOffset{off("t", int32(i%4), int64(i)), off("gone", 0, int64(i))}))
				if i%50 == 0 {
					fail(s.PutGroupMeta(GroupMeta{Group: group, ProtocolType: "consumer", Generation: int32(i)}))
					_, err := s.GroupOffsets(group)
					fail(err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			_, err := s.DeleteTopicOffsets("gone")
			fail(err)
			_, err = s.Groups()
			fail(err)
		}
	})
	wg.Wait()
	if failed.Load() {
		return
	}
	if _, err := s.DeleteTopicOffsets("gone"); err != nil {
		t.Fatal(err)
	}
	for g := range goroutines {
		group := fmt.Sprintf("g%d", g)
		mustOffsets(t, s, group, []GroupOffset{off("t", 0, commits-4), off("t", 1, commits-3), off("t", 2, commits-2), off("t", 3, commits-1)})
	}
	gs, err := s.Groups()
	if err != nil || len(gs) != goroutines {
		t.Fatalf("Groups() = %+v, %v", gs, err)
	}
	for _, m := range gs {
		if m.ProtocolType != "consumer" || m.Generation != 150 {
			t.Fatalf("meta %+v", m)
		}
	}
}

func TestGroupsInvalid(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("g", maxGroupNameLen+1)
	for _, tc := range []struct {
		name string
		op   func(s *Store) error
	}{
		{"commit empty group", func(s *Store) error { return s.CommitOffsets("", []GroupOffset{off("t", 0, 1)}) }},
		{"commit long group", func(s *Store) error { return s.CommitOffsets(long, []GroupOffset{off("t", 0, 1)}) }},
		{"commit empty topic", func(s *Store) error { return s.CommitOffsets("g", []GroupOffset{off("", 0, 1)}) }},
		{"commit bad topic", func(s *Store) error { return s.CommitOffsets("g", []GroupOffset{off("a/b", 0, 1)}) }},
		{"commit long topic", func(s *Store) error {
			return s.CommitOffsets("g", []GroupOffset{off(strings.Repeat("t", 250), 0, 1)})
		}},
		{"commit negative partition", func(s *Store) error { return s.CommitOffsets("g", []GroupOffset{off("t", -1, 1)}) }},
		{"commit offset below -1", func(s *Store) error { return s.CommitOffsets("g", []GroupOffset{off("t", 0, -2)}) }},
		{"commit epoch below -1", func(s *Store) error {
			return s.CommitOffsets("g", []GroupOffset{{Topic: "t", Offset: 1, LeaderEpoch: -2}})
		}},
		{"commit negative timestamp", func(s *Store) error {
			return s.CommitOffsets("g", []GroupOffset{{Topic: "t", Offset: 1, LeaderEpoch: -1, CommitTimestamp: -1}})
		}},
		{"commit one bad of many", func(s *Store) error {
			return s.CommitOffsets("g", []GroupOffset{off("t", 0, 1), off("t", 1, -5), off("t", 2, 1)})
		}},
		{"offsets empty group", func(s *Store) error { _, err := s.GroupOffsets(""); return err }},
		{"delete offsets empty group", func(s *Store) error { return s.DeleteOffsets("", "t", []int32{0}) }},
		{"delete offsets bad topic", func(s *Store) error { return s.DeleteOffsets("g", "..", nil) }},
		{"delete offsets negative partition", func(s *Store) error { return s.DeleteOffsets("g", "t", []int32{0, -1}) }},
		{"delete topic offsets bad topic", func(s *Store) error { _, err := s.DeleteTopicOffsets("a b"); return err }},
		{"meta empty group", func(s *Store) error { return s.PutGroupMeta(GroupMeta{ProtocolType: "consumer"}) }},
		{"meta long group", func(s *Store) error { return s.PutGroupMeta(GroupMeta{Group: long}) }},
		{"meta negative generation", func(s *Store) error { return s.PutGroupMeta(GroupMeta{Group: "g", Generation: -1}) }},
		{"delete empty group", func(s *Store) error { return s.DeleteGroup("") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			mustCommit(t, s, "keep", off("t", 0, 1))
			err := tc.op(s)
			if err == nil || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrClosed) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			mustGroups(t, s, []GroupMeta{{Group: "keep"}})
			mustOffsets(t, s, "keep", []GroupOffset{off("t", 0, 1)})
		})
	}
	// The limits themselves are accepted.
	s := openMem(t)
	g := strings.Repeat("g", maxGroupNameLen)
	mustCommit(t, s, g, off(strings.Repeat("t", maxTopicNameLen), 1<<31-1, -1))
	if err := s.PutGroupMeta(GroupMeta{Group: g, Generation: 1<<31 - 1}); err != nil {
		t.Fatal(err)
	}
	mustGroups(t, s, []GroupMeta{{Group: g, Generation: 1<<31 - 1}})
}

// TestCommitOffsetsTooLarge: a commit that does not fit one transaction
// fails with ErrTooLarge and writes nothing.
func TestCommitOffsetsTooLarge(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	offs := make([]GroupOffset, s.db.MaxBatchCount())
	for i := range offs {
		offs[i] = off("t", int32(i), 1)
	}
	if err := s.CommitOffsets("g", offs); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("CommitOffsets of %d offsets: %v, want ErrTooLarge", len(offs), err)
	}
	mustGroups(t, s, nil)
	if err := s.DeleteOffsets("g", "t", make([]int32, s.db.MaxBatchCount())); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("DeleteOffsets: %v, want ErrTooLarge", err)
	}
}

func TestGroupsClosed(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"CommitOffsets", func() error { return s.CommitOffsets("g", []GroupOffset{off("t", 0, 1)}) }},
		{"CommitOffsets empty", func() error { return s.CommitOffsets("g", nil) }},
		{"GroupOffsets", func() error { _, err := s.GroupOffsets("g"); return err }},
		{"DeleteOffsets", func() error { return s.DeleteOffsets("g", "t", []int32{0}) }},
		{"DeleteTopicOffsets", func() error { _, err := s.DeleteTopicOffsets("t"); return err }},
		{"PutGroupMeta", func() error { return s.PutGroupMeta(GroupMeta{Group: "g"}) }},
		{"DeleteGroup", func() error { return s.DeleteGroup("g") }},
		{"Groups", func() error { _, err := s.Groups(); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := tc.op(); !errors.Is(err, ErrClosed) {
				t.Fatalf("%s after Close: %v", tc.name, err)
			}
		})
	}
}

// TestGroupsCorrupt: group records written directly with Badger that fail
// to decode are reported as ErrCorrupt, naming the key.
func TestGroupsCorrupt(t *testing.T) {
	t.Parallel()
	offKey := string(appendGroupOffsetKey(nil, groupOffsetKey{"g", "t", 0}))
	good := appendGroupOffset(nil, off("t", 0, 1))
	groupOffsets := func(s *Store) error { _, err := s.GroupOffsets("g"); return err }
	groups := func(s *Store) error { _, err := s.Groups(); return err }
	for _, tc := range []struct {
		name string
		key  string
		val  []byte
		op   func(s *Store) error
	}{
		{"offset garbage", offKey, []byte{1, 2, 3}, groupOffsets},
		{"offset empty", offKey, []byte{}, groupOffsets},
		{"offset unknown version", offKey, append([]byte{2}, good[1:]...), groupOffsets},
		{"offset trailing byte", offKey, append(slices.Clone(good), 0), groupOffsets},
		{"offset below -1", offKey, appendGroupOffset(nil, off("t", 0, -2)), groupOffsets},
		{"offset metadata length", offKey, append(slices.Clone(good[:len(good)-4]), 0xff, 0xff, 0xff, 0xff), groupOffsets},
		{"offset key bad topic", string(appendGroupOffsetKey(nil, groupOffsetKey{"g", "a/b", 0})), good, groupOffsets},
		{"offset key negative partition", string(appendGroupOffsetKey(nil, groupOffsetKey{"g", "t", -1})), good, groupOffsets},
		{"offset key trailing byte", offKey + "x", good, groupOffsets},
		{"offset key short", offKey[:len(offKey)-1], good, groupOffsets},
		{"offset key bad group", keyGroupOffsetPrefix + "\x05ab", good, groups},
		{"offset key empty group", keyGroupOffsetPrefix + "\x00\x01t\x00\x00\x00\x00", good, groups},
		{"offset key non-minimal group length", keyGroupOffsetPrefix + "\x81\x00g\x01t\x00\x00\x00\x00", good, groups},
		{"meta garbage", string(groupKey("g")), []byte{1}, groups},
		{"meta negative generation", string(groupKey("g")), appendGroupMeta(nil, GroupMeta{Group: "g", Generation: -1}), groups},
		{"meta under another group", string(groupKey("h")), appendGroupMeta(nil, GroupMeta{Group: "g"}), groups},
		{"meta key bad group", keyGroupPrefix + "\x05ab", appendGroupMeta(nil, GroupMeta{Group: "ab"}), groups},
		{"meta key trailing byte", string(groupKey("g")) + "x", appendGroupMeta(nil, GroupMeta{Group: "g"}), groups},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			mustCommit(t, s, "g", off("u", 0, 1))
			putRaw(t, s, tc.key, tc.val)
			err := tc.op(s)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if quoted := fmt.Sprintf("%q", tc.key); !strings.Contains(err.Error(), quoted) {
				t.Fatalf("error %q does not name key %s", err, quoted)
			}
		})
	}
}
