package storage

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A checkpoint writes in Kafka's layout, sorted, and reads back; a
// missing file is an empty checkpoint.
func TestOffsetCheckpointRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if m, err := ReadOffsetCheckpoint(nil, dir, ReplicationOffsetCheckpoint); err != nil || len(m) != 0 {
		t.Fatalf("missing file: %v %v, want an empty checkpoint", m, err)
	}
	offsets := map[TopicPartition]int64{{"orders", 1}: 987, {"orders", 0}: 1234, {"a.b_c-d", 10}: 0}
	if err := WriteOffsetCheckpoint(nil, dir, ReplicationOffsetCheckpoint, offsets); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReplicationOffsetCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n3\na.b_c-d 10 0\norders 0 1234\norders 1 987\n"; string(b) != want {
		t.Fatalf("file %q, want %q", b, want)
	}
	if _, err := os.Stat(filepath.Join(dir, ReplicationOffsetCheckpoint+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a temporary file is left: %v", err)
	}
	got, err := ReadOffsetCheckpoint(nil, dir, ReplicationOffsetCheckpoint)
	if err != nil || !reflect.DeepEqual(got, offsets) {
		t.Fatalf("read back %v %v, want %v", got, err, offsets)
	}
	// An empty map is a valid checkpoint too.
	if err := WriteOffsetCheckpoint(nil, dir, ReplicationOffsetCheckpoint, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadOffsetCheckpoint(nil, dir, ReplicationOffsetCheckpoint); err != nil || len(got) != 0 {
		t.Fatalf("empty checkpoint read back %v %v", got, err)
	}
}

// Every malformed file is ErrCheckpointCorrupt, never a partial map.
func TestOffsetCheckpointCorrupt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body string }{
		{"version 1", "1\n0\n"},
		{"no count", "0\n"},
		{"torn", "0\n1\norders 0 12"},
		{"fewer entries", "0\n2\norders 0 12\n"},
		{"more entries", "0\n1\norders 0 12\norders 1 3\n"},
		{"two fields", "0\n1\norders 12\n"},
		{"four fields", "0\n1\nor ders 0 12\n"},
		{"tab", "0\n1\norders\t0\t12\n"},
		{"negative offset", "0\n1\norders 0 -1\n"},
		{"negative partition", "0\n1\norders -1 5\n"},
		{"partition too big", "0\n1\norders 2147483648 5\n"},
		{"not a number", "0\n1\norders 0 x\n"},
		{"empty topic", "0\n1\n 0 5\n"},
		{"garbage", "\x00\x01\x02\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ReplicationOffsetCheckpoint), []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := ReadOffsetCheckpoint(nil, dir, ReplicationOffsetCheckpoint)
			if !errors.Is(err, ErrCheckpointCorrupt) || m != nil {
				t.Fatalf("%q: %v %v, want ErrCheckpointCorrupt", tc.body, m, err)
			}
		})
	}
}
