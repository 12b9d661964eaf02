package state

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/testutil"
)

// A full filesystem under the store (issue 17 item 1): Badger used to die
// with SIGBUS on the first write into a memory-mapped page the disk could
// not back (here within a few 1 KiB offset commits). Now every write is
// refused with ErrNoSpace, deletions of topics still go through while the
// reserve allows, acknowledged writes stay, and writes resume once space
// is freed, without reopening.
func TestFullDiskStateWrites(t *testing.T) {
	t.Parallel()
	dir := testutil.Tmpfs(t, 128<<20)
	s := openDir(t, dir+"/state")
	meta := strings.Repeat("m", 1024)
	commit := func(i int) error {
		return s.CommitOffsets("g", []GroupOffset{{Topic: "t", Partition: int32(i), Offset: int64(i),
			LeaderEpoch: -1, Metadata: meta, CommitTimestamp: 1}})
	}
	for i := range 3 {
		if err := commit(i); err != nil {
			t.Fatalf("commit %d with space left: %v", i, err)
		}
	}
	if err := s.PutTopic(Topic{Name: "doomed", ID: [16]byte{1}, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if r := s.Reserve(); r < flushReserve+slackReserve+writeReserve {
		t.Fatalf("reserve %d below its fixed parts", r)
	}

	filler := testutil.FillDisk(t, dir, 0)
	for i := 3; i < 50; i++ {
		err := commit(i)
		if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("commit %d on a full disk: %v, want ErrNoSpace", i, err)
		}
		if i == 3 && !strings.Contains(err.Error(), "free space on that filesystem") {
			t.Fatalf("the refusal says nothing of what to do: %v", err)
		}
	}
	if err := s.PutTopic(Topic{Name: "new", ID: [16]byte{2}, Partitions: 1}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("an fsynced write on a full disk: %v", err)
	}

	// Space back down to the part of the reserve deletions may use: topic
	// deletions pass, ordinary writes do not.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.FillDisk(t, dir, s.Reserve()-writeReserve/2)
	if err := commit(50); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("a commit inside the reserve: %v", err)
	}
	if err := s.DeleteTopic("doomed"); err != nil {
		t.Fatalf("deleting a topic inside the reserve: %v", err)
	}
	if err := os.Remove(dir + "/filler"); err != nil {
		t.Fatal(err)
	}
	if err := commit(3); err != nil {
		t.Fatalf("a commit once space was freed: %v", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir+"/state")
	defer s.Close()
	offs, err := s.GroupOffsets("g")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range offs {
		got = append(got, fmt.Sprintf("%d@%d", o.Offset, o.Partition))
	}
	if want := "0@0 1@1 2@2 3@3"; strings.Join(got, " ") != want {
		t.Fatalf("offsets after reopening: %v, want %s", got, want)
	}
	if _, err := s.Topic("doomed"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted topic after reopening: %v", err)
	}
}

// Close flushes the memtable into a memory-mapped table: on a disk another
// program filled it fails with ErrNoSpace instead of a SIGBUS, leaving
// Badger open (its write-ahead log keeps the writes for the next Open).
func TestCloseOnFullDisk(t *testing.T) {
	t.Parallel()
	dir := testutil.Tmpfs(t, 96<<20)
	s, err := Open(dir+"/state", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic(Topic{Name: "kept", ID: [16]byte{1}, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	filler := testutil.FillDisk(t, dir, 0)
	defer os.Remove(filler)
	if err := s.Close(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Close on a full disk: %v, want ErrNoSpace", err)
	}
	if _, err := s.Topics(); !errors.Is(err, ErrClosed) {
		t.Fatalf("a store that failed to close still serves: %v", err)
	}
}
