package state

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func mirrorsEqual(a, b Mirror) bool {
	return a.Name == b.Name && a.SourceClusterID == b.SourceClusterID &&
		maps.Equal(a.Configs, b.Configs) && slices.Equal(a.Include, b.Include) &&
		slices.Equal(a.Exclude, b.Exclude) && maps.Equal(a.Topics, b.Topics)
}

// mustMirror checks that GetMirror returns want, with non-nil maps.
func mustMirror(t *testing.T, s *Store, want Mirror) {
	t.Helper()
	got, err := s.GetMirror(want.Name)
	if err != nil {
		t.Fatalf("GetMirror(%q): %v", want.Name, err)
	}
	if !mirrorsEqual(got, want) {
		t.Fatalf("GetMirror(%q) = %+v, want %+v", want.Name, got, want)
	}
	if got.Configs == nil || got.Topics == nil {
		t.Fatalf("GetMirror(%q): nil map in %+v", want.Name, got)
	}
}

// fullMirror is a mirror with every field set.
func fullMirror(name string) Mirror {
	return Mirror{
		Name:            name,
		SourceClusterID: "MkU3OEVBNTcwNTJENDM2Qk",
		Configs: map[string]string{
			"bootstrap.servers":        "src-1:9092,src-2:9092",
			"mirror.source.cluster.id": "MkU3OEVBNTcwNTJENDM2Qk",
			"mirror.fetch.max.bytes":   "1048576",
			"sasl.jaas.config":         `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`,
			"mirror.groups.exclude":    "",
		},
		Include: []string{"orders\\..*", "payments", "orders\\..*"},
		Exclude: []string{"__.*", "orders\\.tmp"},
		Topics: map[string]PartitionState{
			"orders.eu": StateMirroring,
			"orders.us": StatePaused,
			"payments":  StateStopped,
		},
	}
}

func TestMirrorCRUD(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		puts  []Mirror // applied in order
		final []Mirror // Mirrors() afterwards
	}{
		{
			name:  "bare",
			puts:  []Mirror{{Name: "east"}},
			final: []Mirror{{Name: "east", Configs: map[string]string{}, Topics: map[string]PartitionState{}}},
		},
		{
			name:  "configs, patterns and desired states round trip",
			puts:  []Mirror{fullMirror("a.b_c-D9")},
			final: []Mirror{fullMirror("a.b_c-D9")},
		},
		{
			name: "replace",
			puts: []Mirror{
				fullMirror("m"),
				{Name: "m", SourceClusterID: "other", Configs: map[string]string{"bootstrap.servers": "x:1"},
					Exclude: []string{"tmp.*"}, Topics: map[string]PartitionState{"payments": StateMirroring}},
			},
			final: []Mirror{{Name: "m", SourceClusterID: "other", Configs: map[string]string{"bootstrap.servers": "x:1"},
				Exclude: []string{"tmp.*"}, Topics: map[string]PartitionState{"payments": StateMirroring}}},
		},
		{
			name: "sorted by name",
			puts: []Mirror{{Name: "zeta"}, {Name: "Alpha"}, {Name: "alpha.1"}, {Name: "alpha"}},
			final: []Mirror{
				{Name: "Alpha", Configs: map[string]string{}, Topics: map[string]PartitionState{}},
				{Name: "alpha", Configs: map[string]string{}, Topics: map[string]PartitionState{}},
				{Name: "alpha.1", Configs: map[string]string{}, Topics: map[string]PartitionState{}},
				{Name: "zeta", Configs: map[string]string{}, Topics: map[string]PartitionState{}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			for _, m := range tc.puts {
				if err := s.PutMirror(m); err != nil {
					t.Fatalf("PutMirror(%+v): %v", m, err)
				}
			}
			got, err := s.Mirrors()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.final) {
				t.Fatalf("Mirrors() = %+v, want %+v", got, tc.final)
			}
			for i := range got {
				if !mirrorsEqual(got[i], tc.final[i]) {
					t.Fatalf("Mirrors()[%d] = %+v, want %+v", i, got[i], tc.final[i])
				}
				mustMirror(t, s, tc.final[i])
			}
		})
	}
}

// TestPutMirrorCopies: the store keeps no reference to the caller's maps
// and slices, and hands out fresh ones.
func TestPutMirrorCopies(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	m := fullMirror("m")
	if err := s.PutMirror(m); err != nil {
		t.Fatal(err)
	}
	m.Configs["bootstrap.servers"] = "changed"
	m.Include[0] = "changed"
	m.Topics["payments"] = StateMirroring
	got, err := s.GetMirror("m")
	if err != nil {
		t.Fatal(err)
	}
	if !mirrorsEqual(got, fullMirror("m")) {
		t.Fatalf("stored mirror changed with the caller's: %+v", got)
	}
	got.Configs["x"] = "y"
	got.Topics["new"] = StatePaused
	mustMirror(t, s, fullMirror("m"))
}

func TestMirrorNotFound(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.PutMirror(Mirror{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"b", "", "A", "a/b", "..", strings.Repeat("a", 250)} {
		if _, err := s.GetMirror(name); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetMirror(%q): %v", name, err)
		}
		if err := s.DeleteMirror(name); !errors.Is(err, ErrNotFound) {
			t.Fatalf("DeleteMirror(%q): %v", name, err)
		}
	}
	mustMirror(t, s, Mirror{Name: "a"})
	empty := openMem(t)
	if ms, err := empty.Mirrors(); err != nil || len(ms) != 0 {
		t.Fatalf("Mirrors() = %v, %v", ms, err)
	}
}

func TestPutMirrorInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		m    Mirror
	}{
		{"empty name", Mirror{}},
		{"dot", Mirror{Name: "."}},
		{"dot dot", Mirror{Name: ".."}},
		{"slash", Mirror{Name: "a/b"}},
		{"colon", Mirror{Name: "a:b"}},
		{"space", Mirror{Name: "a b"}},
		{"non-ascii", Mirror{Name: "caf\xc3\xa9"}},
		{"too long", Mirror{Name: strings.Repeat("m", 250)}},
		{"empty config name", Mirror{Name: "m", Configs: map[string]string{"": "x"}}},
		{"empty include pattern", Mirror{Name: "m", Include: []string{"a", ""}}},
		{"empty exclude pattern", Mirror{Name: "m", Exclude: []string{""}}},
		{"bad topic name", Mirror{Name: "m", Topics: map[string]PartitionState{"a/b": StateMirroring}}},
		{"empty topic name", Mirror{Name: "m", Topics: map[string]PartitionState{"": StateMirroring}}},
		{"desired UNKNOWN", Mirror{Name: "m", Topics: map[string]PartitionState{"t": StateUnknown}}},
		{"desired LOG_ALIGNMENT", Mirror{Name: "m", Topics: map[string]PartitionState{"t": StateLogAlignment}}},
		{"desired PAUSING", Mirror{Name: "m", Topics: map[string]PartitionState{"t": StatePausing}}},
		{"desired STOPPING", Mirror{Name: "m", Topics: map[string]PartitionState{"t": StateStopping}}},
		{"desired FAILED", Mirror{Name: "m", Topics: map[string]PartitionState{"t": StateFailed}}},
		{"desired no state", Mirror{Name: "m", Topics: map[string]PartitionState{"t": 42}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			if err := s.PutMirror(tc.m); err == nil {
				t.Fatalf("PutMirror(%+v) accepted", tc.m)
			}
			if ms, err := s.Mirrors(); err != nil || len(ms) != 0 {
				t.Fatalf("store changed: %v, %v", ms, err)
			}
		})
	}
	// The longest legal name is accepted, and so is every desired state.
	s := openMem(t)
	long := Mirror{Name: strings.Repeat("m", 249), Topics: map[string]PartitionState{
		"a": StateMirroring, "b": StatePaused, "c": StateStopped}}
	if err := s.PutMirror(long); err != nil {
		t.Fatal(err)
	}
	mustMirror(t, s, Mirror{Name: long.Name, Configs: map[string]string{}, Topics: long.Topics})
}

// TestDeleteMirror: the mirror goes with all its partition states, and
// mirrors whose names extend it keep theirs.
func TestDeleteMirror(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	names := []string{"a", "ab", "a.b", "b"}
	for _, name := range names {
		if err := s.PutMirror(fullMirror(name)); err != nil {
			t.Fatal(err)
		}
		for _, topic := range []string{"orders.eu", "payments"} {
			for p := range int32(3) {
				putState(t, s, MirrorPartitionState{Mirror: name, Topic: topic, Partition: p,
					State: StateLogAlignment, LastMirrorEpoch: -1, LastMirrorOffset: -1})
			}
		}
	}
	if err := s.DeleteMirror("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMirror("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetMirror after delete: %v", err)
	}
	if ps, err := s.MirrorPartitionStates("a"); err != nil || len(ps) != 0 {
		t.Fatalf("partition states after delete: %v, %v", ps, err)
	}
	if _, err := s.MirrorPartitionState("a", "payments", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("MirrorPartitionState after delete: %v", err)
	}
	if err := s.DeleteMirror("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	ms, err := s.Mirrors()
	if err != nil || len(ms) != 3 {
		t.Fatalf("Mirrors() = %v, %v", ms, err)
	}
	for _, name := range names[1:] {
		mustMirror(t, s, fullMirror(name))
		if ps, err := s.MirrorPartitionStates(name); err != nil || len(ps) != 6 {
			t.Fatalf("mirror %q: %d states, %v", name, len(ps), err)
		}
	}
	// A deleted mirror takes no more partition states; a new one of the
	// same name starts from UNKNOWN.
	p := MirrorPartitionState{Mirror: "a", Topic: "payments", State: StateLogAlignment,
		LastMirrorEpoch: -1, LastMirrorOffset: -1}
	if err := s.PutMirrorPartitionState(p); !errors.Is(err, ErrNotFound) {
		t.Fatalf("state of a deleted mirror: %v", err)
	}
	if err := s.PutMirror(Mirror{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	putState(t, s, p)
}

// bulkStates writes n partition states of mirror's topic directly with a
// Badger write batch, to test deletes spanning several transactions.
func bulkStates(t *testing.T, s *Store, mirror, topic string, n int) {
	t.Helper()
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	val := appendMirrorPartitionState(nil, MirrorPartitionState{State: StateMirroring,
		Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1})
	for p := range int32(n) {
		if err := wb.Set(appendMirrorPartitionKey(nil, mirrorPartitionKey{mirror, topic, p}), val); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteMirrorMany: a mirror with more partition states than one
// transaction holds is still deleted whole, and so is a topic's states.
func TestDeleteMirrorMany(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	n := int(s.db.MaxBatchCount()) + 100 // more than two delete batches
	for _, name := range []string{"big", "other"} {
		if err := s.PutMirror(Mirror{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	bulkStates(t, s, "big", "t", n)
	bulkStates(t, s, "other", "t", 3)
	if err := s.DeleteMirror("big"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMirror("big"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetMirror after delete: %v", err)
	}
	if ps, err := s.MirrorPartitionStates("big"); err != nil || len(ps) != 0 {
		t.Fatalf("%d states left, %v", len(ps), err)
	}

	bulkStates(t, s, "other", "u", n)
	if err := s.DeleteMirrorPartitionStates("other", "u"); err != nil {
		t.Fatal(err)
	}
	ps, err := s.MirrorPartitionStates("other")
	if err != nil || len(ps) != 3 || ps[0].Topic != "t" {
		t.Fatalf("after deleting topic u: %d states, %v", len(ps), err)
	}
}

// TestMirrorPersistence: mirrors and partition states survive Close and
// Open on a real directory.
func TestMirrorPersistence(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	s := openDir(t, dir)
	mirrors := []Mirror{fullMirror("east"), {Name: "west", Configs: map[string]string{"bootstrap.servers": "w:9092"},
		Topics: map[string]PartitionState{}}}
	for _, m := range mirrors {
		if err := s.PutMirror(m); err != nil {
			t.Fatal(err)
		}
	}
	states := []MirrorPartitionState{
		{Mirror: "east", Topic: "orders.eu", Partition: 0, State: StateFailed, Previous: StateMirroring,
			RetryAttempt: 3, ErrorMessage: "fetch: connection refused", LastMirrorEpoch: -1, LastMirrorOffset: -1},
		{Mirror: "east", Topic: "payments", Partition: 7, State: StateStopping, Previous: StateUnknown,
			LastMirrorEpoch: 12, LastMirrorOffset: 1 << 40},
	}
	for _, p := range states {
		if p.State == StateStopping {
			stepTo(t, s, p, StateLogAlignment, StateMirroring)
		}
		putState(t, s, p)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openDir(t, dir)
	defer s.Close()
	got, err := s.Mirrors()
	if err != nil || len(got) != len(mirrors) {
		t.Fatalf("Mirrors() = %+v, %v", got, err)
	}
	for i := range mirrors {
		if !mirrorsEqual(got[i], mirrors[i]) {
			t.Fatalf("mirror %d = %+v, want %+v", i, got[i], mirrors[i])
		}
	}
	ps, err := s.MirrorPartitionStates("east")
	if err != nil || !slices.Equal(ps, states) {
		t.Fatalf("MirrorPartitionStates = %+v, %v; want %+v", ps, err, states)
	}
	// The transition check sees the reloaded state.
	next := states[1]
	next.State = StateStopped
	putState(t, s, next)
	next.State = StateMirroring
	if err := s.PutMirrorPartitionState(next); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("STOPPED -> MIRRORING after reopen: %v", err)
	}
}

func TestMirrorClosed(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	p := MirrorPartitionState{Mirror: "m", Topic: "t", State: StateLogAlignment, LastMirrorEpoch: -1, LastMirrorOffset: -1}
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"PutMirror", func() error { return s.PutMirror(Mirror{Name: "m"}) }},
		{"GetMirror", func() error { _, err := s.GetMirror("m"); return err }},
		{"Mirrors", func() error { _, err := s.Mirrors(); return err }},
		{"DeleteMirror", func() error { return s.DeleteMirror("m") }},
		{"PutMirrorPartitionState", func() error { return s.PutMirrorPartitionState(p) }},
		{"MirrorPartitionStates", func() error { _, err := s.MirrorPartitionStates("m"); return err }},
		{"MirrorPartitionState", func() error { _, err := s.MirrorPartitionState("m", "t", 0); return err }},
		{"DeleteMirrorPartitionStates", func() error { return s.DeleteMirrorPartitionStates("m", "t") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := tc.op(); !errors.Is(err, ErrClosed) {
				t.Fatalf("%s after Close: %v", tc.name, err)
			}
		})
	}
}

// TestMirrorCorrupt: values and keys written directly with Badger that fail
// to decode are reported as ErrCorrupt, naming the key, by every operation
// reading them.
func TestMirrorCorrupt(t *testing.T) {
	t.Parallel()
	good := appendMirror(nil, Mirror{Name: "m", Topics: map[string]PartitionState{"a": StateMirroring, "b": StatePaused}})
	goodState := appendMirrorPartitionState(nil, MirrorPartitionState{State: StateMirroring,
		Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1})
	stateKey := string(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "t", 0}))
	getState := func(s *Store) error { _, err := s.MirrorPartitionState("m", "t", 0); return err }
	listStates := func(s *Store) error { _, err := s.MirrorPartitionStates("m"); return err }
	for _, tc := range []struct {
		name string
		key  string
		val  []byte
		op   func(s *Store) error
	}{
		{"mirror garbage", "v1/mirror/m", []byte{1, 2, 3},
			func(s *Store) error { _, err := s.GetMirror("m"); return err }},
		{"mirror unknown version", "v1/mirror/m", append([]byte{2}, good[1:]...),
			func(s *Store) error { _, err := s.Mirrors(); return err }},
		{"mirror empty value", "v1/mirror/m", []byte{},
			func(s *Store) error { _, err := s.Mirrors(); return err }},
		{"mirror under another name", "v1/mirror/n", good,
			func(s *Store) error { _, err := s.GetMirror("n"); return err }},
		{"mirror trailing byte", "v1/mirror/m", append(slices.Clone(good), 0),
			func(s *Store) error { _, err := s.GetMirror("m"); return err }},
		{"mirror truncated", "v1/mirror/m", good[:len(good)-1],
			func(s *Store) error { _, err := s.Mirrors(); return err }},
		{"mirror bad desired state", "v1/mirror/m", append(slices.Clone(good[:len(good)-1]), byte(StateFailed)),
			func(s *Store) error { _, err := s.GetMirror("m"); return err }},
		{"mirror topics not ascending", "v1/mirror/m", swapTopics(good),
			func(s *Store) error { _, err := s.GetMirror("m"); return err }},
		{"state garbage", stateKey, []byte{1, 3}, getState},
		{"state unknown version", stateKey, append([]byte{0}, goodState[1:]...), listStates},
		{"state UNKNOWN", stateKey, append([]byte{1, 0xff}, goodState[2:]...), getState},
		{"state trailing byte", stateKey, append(slices.Clone(goodState), 'x'), listStates},
		{"state before a write", stateKey, []byte{1, 3},
			func(s *Store) error {
				return s.PutMirrorPartitionState(MirrorPartitionState{Mirror: "m", Topic: "t",
					State: StateFailed, RetryAttempt: -1, LastMirrorEpoch: -1, LastMirrorOffset: -1})
			}},
		{"state key bad topic", string(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "a:b", 0})), goodState, listStates},
		{"state key negative partition", string(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "t", -1})), goodState, listStates},
		{"state key short", "v1/mirror-partition/m/\x01t\x00\x00\x00", goodState, listStates},
		{"state key non-minimal length", "v1/mirror-partition/m/\x81\x00t\x00\x00\x00\x00", goodState, listStates},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			if !strings.HasPrefix(tc.key, "v1/mirror/") {
				if err := s.PutMirror(Mirror{Name: "m"}); err != nil {
					t.Fatal(err)
				}
			}
			putRaw(t, s, tc.key, tc.val)
			err := tc.op(s)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.key)) {
				t.Fatalf("error %q does not name key %q", err, tc.key)
			}
		})
	}
}

// swapTopics returns a copy of a mirror value whose last two topic names,
// "a" and "b" of one byte each, trade places.
func swapTopics(v []byte) []byte {
	v = slices.Clone(v)
	n := len(v)
	// ... 0 0 0 1 'a' st  0 0 0 1 'b' st
	v[n-8], v[n-2] = v[n-2], v[n-8]
	return v
}

// TestDeleteCorruptMirror: DeleteMirror and DeleteMirrorPartitionStates
// remove corrupt records without reading them (the repair path).
func TestDeleteCorruptMirror(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.PutMirror(Mirror{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	putRaw(t, s, string(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "t", 0})), []byte{7})
	if err := s.DeleteMirrorPartitionStates("m", "t"); err != nil {
		t.Fatal(err)
	}
	if ps, err := s.MirrorPartitionStates("m"); err != nil || len(ps) != 0 {
		t.Fatalf("after delete: %v, %v", ps, err)
	}
	putRaw(t, s, "v1/mirror/m", []byte{9})
	putRaw(t, s, string(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "u", 1})), []byte{9})
	putRaw(t, s, "v1/mirror-partition/m/garbage", []byte{9})
	if err := s.DeleteMirror("m"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"v1/mirror/m", "v1/mirror-partition/m/garbage"} {
		if hasRaw(t, s, key) {
			t.Fatalf("%q left behind", key)
		}
	}
}
