package state

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/kmirror/kmirror/batch"
)

// openMem opens an in-memory store closed at the end of the test.
func openMem(t *testing.T) *Store {
	t.Helper()
	s, err := Open("", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openDir opens a store in dir; the caller closes it.
func openDir(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tid makes a topic id from a few bytes.
func tid(b ...byte) [16]byte {
	var id [16]byte
	copy(id[:], b)
	return id
}

// putRaw writes a value directly with Badger, bypassing the encoders: the
// test hook for corrupt records.
func putRaw(t *testing.T, s *Store, key string, val []byte) {
	t.Helper()
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(key), val) }); err != nil {
		t.Fatal(err)
	}
}

// hasRaw reports whether key exists, read directly with Badger.
func hasRaw(t *testing.T, s *Store, key string) bool {
	t.Helper()
	var found bool
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte(key))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func topicsEqual(a, b Topic) bool {
	return a.Name == b.Name && a.ID == b.ID && a.Partitions == b.Partitions &&
		a.Mirror == b.Mirror && maps.Equal(a.Configs, b.Configs)
}

func mustTopic(t *testing.T, s *Store, want Topic) {
	t.Helper()
	got, err := s.Topic(want.Name)
	if err != nil {
		t.Fatalf("Topic(%q): %v", want.Name, err)
	}
	if !topicsEqual(got, want) {
		t.Fatalf("Topic(%q) = %+v, want %+v", want.Name, got, want)
	}
	if got.Configs == nil {
		t.Fatalf("Topic(%q): nil Configs", want.Name)
	}
	byID, err := s.TopicByID(want.ID)
	if err != nil {
		t.Fatalf("TopicByID(%x): %v", want.ID, err)
	}
	if !topicsEqual(byID, want) {
		t.Fatalf("TopicByID(%x) = %+v, want %+v", want.ID, byID, want)
	}
}

func TestTopicCRUD(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		puts  []Topic // applied in order
		final []Topic // Topics() afterwards
		gone  [][16]byte
	}{
		{
			name:  "plain",
			puts:  []Topic{{Name: "orders", ID: tid(1), Partitions: 3}},
			final: []Topic{{Name: "orders", ID: tid(1), Partitions: 3}},
		},
		{
			name: "configs and mirror round trip",
			puts: []Topic{{Name: "a.b_c-D9", ID: tid(0xff, 2), Partitions: 1 << 20, Mirror: "east",
				Configs: map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "-1", "empty": ""}}},
			final: []Topic{{Name: "a.b_c-D9", ID: tid(0xff, 2), Partitions: 1 << 20, Mirror: "east",
				Configs: map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "-1", "empty": ""}}},
		},
		{
			name: "replace keeps id, changes partitions and configs",
			puts: []Topic{
				{Name: "t", ID: tid(3), Partitions: 1, Configs: map[string]string{"a": "1", "b": "2"}},
				{Name: "t", ID: tid(3), Partitions: 6, Configs: map[string]string{"b": "3"}},
			},
			final: []Topic{{Name: "t", ID: tid(3), Partitions: 6, Configs: map[string]string{"b": "3"}}},
		},
		{
			name: "recreate under a new id drops the old index entry",
			puts: []Topic{
				{Name: "t", ID: tid(4), Partitions: 1},
				{Name: "t", ID: tid(5), Partitions: 2},
			},
			final: []Topic{{Name: "t", ID: tid(5), Partitions: 2}},
			gone:  [][16]byte{tid(4)},
		},
		{
			name: "sorted by name",
			puts: []Topic{
				{Name: "zeta", ID: tid(6), Partitions: 1},
				{Name: "Alpha", ID: tid(7), Partitions: 1},
				{Name: "alpha", ID: tid(8), Partitions: 1},
				{Name: "alpha.1", ID: tid(9), Partitions: 1},
			},
			final: []Topic{
				{Name: "Alpha", ID: tid(7), Partitions: 1},
				{Name: "alpha", ID: tid(8), Partitions: 1},
				{Name: "alpha.1", ID: tid(9), Partitions: 1},
				{Name: "zeta", ID: tid(6), Partitions: 1},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			for _, p := range tc.puts {
				if err := s.PutTopic(p); err != nil {
					t.Fatalf("PutTopic(%+v): %v", p, err)
				}
			}
			got, err := s.Topics()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.final) {
				t.Fatalf("Topics() = %+v, want %+v", got, tc.final)
			}
			for i := range got {
				if !topicsEqual(got[i], tc.final[i]) {
					t.Fatalf("Topics()[%d] = %+v, want %+v", i, got[i], tc.final[i])
				}
				mustTopic(t, s, tc.final[i])
			}
			for _, id := range tc.gone {
				if _, err := s.TopicByID(id); !errors.Is(err, ErrNotFound) {
					t.Fatalf("TopicByID(%x) = %v, want ErrNotFound", id, err)
				}
				if hasRaw(t, s, string(topicIDKey(id))) {
					t.Fatalf("index entry for %x left behind", id)
				}
			}
		})
	}
}

func TestTopicNotFound(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if _, err := s.Topic("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Topic: %v", err)
	}
	if _, err := s.Topic(""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Topic(\"\"): %v", err)
	}
	if _, err := s.TopicByID(tid(1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("TopicByID: %v", err)
	}
	if ts, err := s.Topics(); err != nil || len(ts) != 0 {
		t.Fatalf("Topics() = %v, %v", ts, err)
	}
}

func TestPutTopicInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		t    Topic
	}{
		{"empty name", Topic{ID: tid(1), Partitions: 1}},
		{"dot", Topic{Name: ".", ID: tid(1), Partitions: 1}},
		{"dot dot", Topic{Name: "..", ID: tid(1), Partitions: 1}},
		{"slash", Topic{Name: "a/b", ID: tid(1), Partitions: 1}},
		{"space", Topic{Name: "a b", ID: tid(1), Partitions: 1}},
		{"non-ascii", Topic{Name: "caf\xc3\xa9", ID: tid(1), Partitions: 1}},
		{"too long", Topic{Name: strings.Repeat("x", 250), ID: tid(1), Partitions: 1}},
		{"zero partitions", Topic{Name: "t", ID: tid(1)}},
		{"negative partitions", Topic{Name: "t", ID: tid(1), Partitions: -1}},
		{"zero id", Topic{Name: "t", Partitions: 1}},
		{"empty config name", Topic{Name: "t", ID: tid(1), Partitions: 1, Configs: map[string]string{"": "x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			if err := s.PutTopic(tc.t); err == nil {
				t.Fatalf("PutTopic(%+v) accepted", tc.t)
			}
			if ts, err := s.Topics(); err != nil || len(ts) != 0 {
				t.Fatalf("store changed: %v, %v", ts, err)
			}
		})
	}
	// The longest legal name is accepted.
	s := openMem(t)
	if err := s.PutTopic(Topic{Name: strings.Repeat("x", 249), ID: tid(1), Partitions: 1}); err != nil {
		t.Fatal(err)
	}
}

func TestPutTopicDuplicateID(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	a := Topic{Name: "a", ID: tid(1), Partitions: 1}
	if err := s.PutTopic(a); err != nil {
		t.Fatal(err)
	}
	b := Topic{Name: "b", ID: tid(1), Partitions: 2}
	if err := s.PutTopic(b); err == nil {
		t.Fatal("second topic with the same id accepted")
	}
	mustTopic(t, s, a)
	if _, err := s.Topic("b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("refused topic stored: %v", err)
	}
	// Once a is gone, its id is free again.
	if err := s.DeleteTopic("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic(b); err != nil {
		t.Fatal(err)
	}
	mustTopic(t, s, b)
}

// TestPutTopicDuplicateIDRace: concurrent puts of different names with one
// id; Badger's conflict detection plus the retry let exactly one win.
func TestPutTopicDuplicateIDRace(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.PutTopic(Topic{Name: "t" + string(rune('0'+i)), ID: tid(42), Partitions: 1})
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
		}
	}
	ts, err := s.Topics()
	if err != nil {
		t.Fatal(err)
	}
	if wins != 1 || len(ts) != 1 {
		t.Fatalf("%d puts won, %d topics stored (%v)", wins, len(ts), errs)
	}
	mustTopic(t, s, ts[0])
}

func TestDeleteTopic(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	keep := Topic{Name: "keep", ID: tid(1), Partitions: 1}
	drop := Topic{Name: "drop", ID: tid(2), Partitions: 4, Configs: map[string]string{"x": "y"}}
	for _, tp := range []Topic{keep, drop} {
		if err := s.PutTopic(tp); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteTopic("drop"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Topic("drop"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Topic after delete: %v", err)
	}
	if _, err := s.TopicByID(drop.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("TopicByID after delete: %v", err)
	}
	if hasRaw(t, s, string(topicIDKey(drop.ID))) {
		t.Fatal("index entry left behind")
	}
	if err := s.DeleteTopic("drop"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	mustTopic(t, s, keep)
}

func TestBrokerConfigs(t *testing.T) {
	t.Parallel()
	type step struct {
		set     map[string]string
		del     []string
		wantErr bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  map[string]string
	}{
		{"empty", nil, map[string]string{}},
		{"set", []step{{set: map[string]string{"log.retention.ms": "1000", "empty": ""}}},
			map[string]string{"log.retention.ms": "1000", "empty": ""}},
		{"overwrite and delete", []step{
			{set: map[string]string{"a": "1", "b": "2", "c": "3"}},
			{set: map[string]string{"a": "10"}, del: []string{"b", "never.set"}},
		}, map[string]string{"a": "10", "c": "3"}},
		{"refused steps change nothing", []step{
			{set: map[string]string{"a": "1"}},
			{set: map[string]string{"a": "2"}, del: []string{"a"}, wantErr: true},
			{set: map[string]string{"": "x", "b": "2"}, wantErr: true},
			{del: []string{"a", ""}, wantErr: true},
		}, map[string]string{"a": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			for i, st := range tc.steps {
				err := s.SetBrokerConfigs(st.set, st.del)
				if (err != nil) != st.wantErr {
					t.Fatalf("step %d: err %v, want error %v", i, err, st.wantErr)
				}
			}
			got, err := s.BrokerConfigs()
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !maps.Equal(got, tc.want) {
				t.Fatalf("BrokerConfigs() = %v, want %v", got, tc.want)
			}
			// The same steps on a node's configs give the same result
			// and leave the cluster default and other nodes alone.
			n := openMem(t)
			for i, st := range tc.steps {
				if err := n.SetNodeConfigs(1, st.set, st.del); (err != nil) != st.wantErr {
					t.Fatalf("node step %d: err %v, want error %v", i, err, st.wantErr)
				}
			}
			if got, err := n.NodeConfigs(1); err != nil || got == nil || !maps.Equal(got, tc.want) {
				t.Fatalf("NodeConfigs(1) = %v, %v, want %v", got, err, tc.want)
			}
			for _, other := range []func() (map[string]string, error){n.BrokerConfigs,
				func() (map[string]string, error) { return n.NodeConfigs(10) }} {
				if got, err := other(); err != nil || len(got) != 0 {
					t.Fatalf("another scope sees %v, %v", got, err)
				}
			}
		})
	}
}

// TestPersistence: everything survives Close and Open on a real directory,
// and producer ids keep increasing across the restart.
func TestPersistence(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state") // Open creates it
	s := openDir(t, dir)
	id := s.ClusterID()
	topics := []Topic{
		{Name: "a", ID: tid(1), Partitions: 3, Configs: map[string]string{"retention.ms": "5"}},
		{Name: "b", ID: tid(2), Partitions: 1, Mirror: "west"},
	}
	for _, tp := range topics {
		if err := s.PutTopic(tp); err != nil {
			t.Fatal(err)
		}
	}
	configs := map[string]string{"log.segment.bytes": "1048576"}
	if err := s.SetBrokerConfigs(configs, nil); err != nil {
		t.Fatal(err)
	}
	var maxIssued int64 = -1
	for _, n := range []int64{1, 1000, 7} {
		first, err := s.AllocateProducerIDs(n)
		if err != nil {
			t.Fatal(err)
		}
		if first <= maxIssued {
			t.Fatalf("block at %d after id %d", first, maxIssued)
		}
		maxIssued = first + n - 1
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openDir(t, dir)
	defer s.Close()
	if got := s.ClusterID(); got != id {
		t.Fatalf("cluster id %q after reopen, was %q", got, id)
	}
	got, err := s.Topics()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(topics) {
		t.Fatalf("Topics() = %+v", got)
	}
	for i := range topics {
		if !topicsEqual(got[i], topics[i]) {
			t.Fatalf("topic %d = %+v, want %+v", i, got[i], topics[i])
		}
		mustTopic(t, s, topics[i])
	}
	if bc, err := s.BrokerConfigs(); err != nil || !maps.Equal(bc, configs) {
		t.Fatalf("BrokerConfigs() = %v, %v", bc, err)
	}
	first, err := s.AllocateProducerIDs(1)
	if err != nil {
		t.Fatal(err)
	}
	if first <= maxIssued {
		t.Fatalf("id %d after reopen, %d issued before", first, maxIssued)
	}
}

func TestClusterID(t *testing.T) {
	t.Parallel()
	a, b := openMem(t), openMem(t)
	for _, id := range []string{a.ClusterID(), b.ClusterID()} {
		if len(id) != 22 || id[0] == '-' {
			t.Fatalf("cluster id %q", id)
		}
		raw, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(raw) != 16 || bytes.Equal(raw, make([]byte, 16)) {
			t.Fatalf("cluster id %q decodes to %x, %v", id, raw, err)
		}
	}
	if a.ClusterID() == b.ClusterID() {
		t.Fatal("two stores share a cluster id")
	}
}

// TestAllocateProducerIDsConcurrent: 8 goroutines allocating at once get
// disjoint blocks that together tile [0, total).
func TestAllocateProducerIDsConcurrent(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	type block struct{ first, n int64 }
	const goroutines, perG = 8, 25
	got := make([][]block, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				n := int64(1 + (g*perG+i)%5)
				first, err := s.AllocateProducerIDs(n)
				if err != nil {
					t.Error(err)
					return
				}
				got[g] = append(got[g], block{first, n})
			}
		})
	}
	wg.Wait()
	var all []block
	var total int64
	for _, bs := range got {
		for i := 1; i < len(bs); i++ {
			if bs[i].first <= bs[i-1].first {
				t.Fatalf("one caller's blocks not increasing: %v", bs)
			}
		}
		for _, b := range bs {
			total += b.n
		}
		all = append(all, bs...)
	}
	slices.SortFunc(all, func(a, b block) int { return cmp.Compare(a.first, b.first) })
	next := firstProducerID
	for _, b := range all {
		if b.first != next {
			t.Fatalf("block %+v, want it to start at %d (overlap or gap)", b, next)
		}
		next += b.n
	}
	if next != total {
		t.Fatalf("blocks end at %d, %d ids handed out", next, total)
	}
}

func TestAllocateProducerIDsLimits(t *testing.T) {
	t.Parallel()
	if producerIDLimit != batch.MirrorPIDOffset {
		t.Fatalf("producerIDLimit %d != batch.MirrorPIDOffset %d", producerIDLimit, batch.MirrorPIDOffset)
	}
	s := openMem(t)
	for _, n := range []int64{0, -1, -1 << 63} {
		if _, err := s.AllocateProducerIDs(n); err == nil {
			t.Fatalf("block of %d accepted", n)
		}
	}
	if _, err := s.AllocateProducerIDs(1<<63 - 1); err == nil {
		t.Fatal("block of MaxInt64 accepted")
	}
	if first, err := s.AllocateProducerIDs(1); err != nil || first != 0 {
		t.Fatalf("first id %d, %v; want 0", first, err)
	}
	putRaw(t, s, keyNextProducerID, appendNextProducerID(nil, producerIDLimit-5))
	if _, err := s.AllocateProducerIDs(6); err == nil {
		t.Fatal("block crossing 1<<62 accepted")
	}
	first, err := s.AllocateProducerIDs(5)
	if err != nil || first != producerIDLimit-5 {
		t.Fatalf("last block at %d, %v", first, err)
	}
	if _, err := s.AllocateProducerIDs(1); err == nil {
		t.Fatal("id 1<<62 issued")
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	id := s.ClusterID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if s.ClusterID() != id {
		t.Fatal("cluster id lost at Close")
	}
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"PutTopic", func() error { return s.PutTopic(Topic{Name: "t", ID: tid(1), Partitions: 1}) }},
		{"Topic", func() error { _, err := s.Topic("t"); return err }},
		{"TopicByID", func() error { _, err := s.TopicByID(tid(1)); return err }},
		{"Topics", func() error { _, err := s.Topics(); return err }},
		{"DeleteTopic", func() error { return s.DeleteTopic("t") }},
		{"BrokerConfigs", func() error { _, err := s.BrokerConfigs(); return err }},
		{"SetBrokerConfigs", func() error { return s.SetBrokerConfigs(map[string]string{"a": "b"}, nil) }},
		{"AllocateProducerIDs", func() error { _, err := s.AllocateProducerIDs(1); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := tc.op(); !errors.Is(err, ErrClosed) {
				t.Fatalf("%s after Close: %v", tc.name, err)
			}
		})
	}
}

// TestCorrupt: values written directly with Badger that fail to decode are
// reported as ErrCorrupt, naming the key, by every operation reading them.
func TestCorrupt(t *testing.T) {
	t.Parallel()
	good := appendTopic(nil, Topic{Name: "t", ID: tid(9), Partitions: 1})
	for _, tc := range []struct {
		name string
		key  string
		val  []byte
		op   func(s *Store) error
	}{
		{"topic garbage", "v1/topic/t", []byte{1, 2, 3},
			func(s *Store) error { _, err := s.Topic("t"); return err }},
		{"topic unknown version", "v1/topic/t", append([]byte{2}, good[1:]...),
			func(s *Store) error { _, err := s.Topics(); return err }},
		{"topic empty value", "v1/topic/t", []byte{},
			func(s *Store) error { _, err := s.Topics(); return err }},
		{"topic under another name", "v1/topic/u", good,
			func(s *Store) error { _, err := s.Topic("u"); return err }},
		{"topic trailing byte", "v1/topic/t", append(slices.Clone(good), 0),
			func(s *Store) error { return s.PutTopic(Topic{Name: "t", ID: tid(9), Partitions: 2}) }},
		{"topic id index", string(topicIDKey(tid(9))), []byte{1, 0, 0, 0, 5, 'a'},
			func(s *Store) error { _, err := s.TopicByID(tid(9)); return err }},
		{"topic id index bad name", string(topicIDKey(tid(9))), appendTopicIndex(nil, "a/b"),
			func(s *Store) error { return s.PutTopic(Topic{Name: "t", ID: tid(9), Partitions: 1}) }},
		{"broker config", "v1/broker-config/a", []byte{1, 0xff, 0xff, 0xff, 0xff},
			func(s *Store) error { _, err := s.BrokerConfigs(); return err }},
		{"next producer id", keyNextProducerID, []byte{1, 0x7f, 0, 0, 0, 0, 0, 0, 0},
			func(s *Store) error { _, err := s.AllocateProducerIDs(1); return err }},
		{"next producer id short", keyNextProducerID, []byte{1, 0},
			func(s *Store) error { _, err := s.AllocateProducerIDs(1); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			putRaw(t, s, tc.key, tc.val)
			err := tc.op(s)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("error %q does not name key %q", err, tc.key)
			}
		})
	}
}

// TestCorruptClusterID: a damaged cluster id fails Open, naming the key.
func TestCorruptClusterID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	putRaw(t, s, keyClusterID, appendClusterID(nil, [16]byte{}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a zero cluster id")
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), keyClusterID) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open: %v", err)
	}
}

// TestDeleteCorruptTopic: DeleteTopic removes a corrupt record (the repair
// path), and the index entry it leaves behind is treated as stale.
func TestDeleteCorruptTopic(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	tp := Topic{Name: "t", ID: tid(1), Partitions: 1}
	if err := s.PutTopic(tp); err != nil {
		t.Fatal(err)
	}
	putRaw(t, s, "v1/topic/t", []byte{9})
	if err := s.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TopicByID(tp.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("TopicByID through a stale entry: %v", err)
	}
	// The stale entry does not block the id.
	other := Topic{Name: "u", ID: tp.ID, Partitions: 2}
	if err := s.PutTopic(other); err != nil {
		t.Fatal(err)
	}
	mustTopic(t, s, other)
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"", file, filepath.Join(file, "sub")} {
		s, err := Open(dir, Options{})
		if err == nil {
			s.Close()
			t.Fatalf("Open(%q) succeeded", dir)
		}
		if dir != "" && !strings.Contains(err.Error(), dir) {
			t.Fatalf("Open(%q): error %q does not name the dir", dir, err)
		}
	}
	// A directory in use by another store is refused (Badger's lock).
	dir := t.TempDir()
	s := openDir(t, dir)
	defer s.Close()
	if s2, err := Open(dir, Options{}); err == nil || !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "stop it first") {
		if err == nil {
			s2.Close()
		}
		t.Fatalf("second Open of a directory in use: %v, want ErrLocked", err)
	}
}

// TestOpenDamagedSaysWhatToDo damages a closed store's manifest: the open
// is refused, and the error says what the operator can do next.
func TestOpenDamagedSaysWhatToDo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openDir(t, dir).Close()
	manifest := filepath.Join(dir, "MANIFEST")
	b, err := os.ReadFile(manifest)
	if err != nil || len(b) < 4 {
		t.Fatalf("reading the manifest: %v (%d bytes)", err, len(b))
	}
	b[len(b)-3] ^= 0xff
	if err := os.WriteFile(manifest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err == nil {
		s.Close()
		t.Fatal("a store with a damaged manifest opened")
	}
	for _, want := range []string{dir, "checksum mismatch", "restore " + dir + " from a backup", "move it aside", "kmirror storage rebuild"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// captureHandler records the levels and messages it is handed.
type captureHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r)
	return nil
}
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }

func TestBadgerLogger(t *testing.T) {
	t.Parallel()
	h := &captureHandler{}
	l := badgerLogger{slog.New(h)}
	l.Debugf("debug %d", 1)
	l.Infof("info %d\n", 2)
	l.Warningf("warn %d\n", 3)
	l.Errorf("error %d", 4)
	if len(h.recs) != 2 {
		t.Fatalf("%d records, want 2 (warn, error)", len(h.recs))
	}
	if h.recs[0].Level != slog.LevelWarn || h.recs[0].Message != "warn 3" ||
		h.recs[1].Level != slog.LevelError || h.recs[1].Message != "error 4" {
		t.Fatalf("records %v", h.recs)
	}
	// A store logs through the injected logger.
	s, err := Open("", Options{InMemory: true, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.recs) < 3 {
		t.Fatal("Open logged nothing")
	}
}

// Each group's configs are its own, whatever bytes the names hold: group
// "a" never reads the configs of "a/b".
func TestGroupConfigs(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.SetGroupConfigs("a", map[string]string{"consumer.session.timeout.ms": "50000"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetGroupConfigs("a/b", map[string]string{"consumer.heartbeat.interval.ms": "6000"}, nil); err != nil {
		t.Fatal(err)
	}
	for group, want := range map[string]map[string]string{
		"a":   {"consumer.session.timeout.ms": "50000"},
		"a/b": {"consumer.heartbeat.interval.ms": "6000"},
		"b":   {},
	} {
		if got, err := s.GroupConfigs(group); err != nil || !maps.Equal(got, want) {
			t.Fatalf("configs of %q: %v, %v; want %v", group, got, err, want)
		}
	}
	if err := s.SetGroupConfigs("", map[string]string{"x": "1"}, nil); err == nil {
		t.Fatal("configs of the group \"\" were stored")
	}
	if err := s.SetGroupConfigs("a", nil, []string{"consumer.session.timeout.ms"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GroupConfigs("a"); len(got) != 0 {
		t.Fatalf("configs of a after the delete: %v", got)
	}
}
