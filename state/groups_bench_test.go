package state

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// benchStores runs fn on an in-memory store and on one in a directory (the
// realistic case: commits go through Badger's write-ahead log).
func benchStores(b *testing.B, fn func(b *testing.B, s *Store)) {
	for _, store := range []string{"disk", "mem"} {
		b.Run("store="+store, func(b *testing.B) {
			var s *Store
			var err error
			if store == "mem" {
				s, err = Open("", Options{InMemory: true})
			} else {
				s, err = Open(filepath.Join(b.TempDir(), "state"), Options{})
			}
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			fn(b, s)
		})
	}
}

// BenchmarkCommitOffsets: sequential OffsetCommits of one partition each,
// the rate one coordinator worker sustains.
func BenchmarkCommitOffsets(b *testing.B) {
	benchStores(b, func(b *testing.B, s *Store) {
		offs := []GroupOffset{off("orders", 0, 0)}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			offs[0].Partition = int32(i % 64)
			offs[0].Offset = int64(i)
			if err := s.CommitOffsets("bench-group", offs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
}

// BenchmarkCommitOffsetsParallel: OffsetCommits of one partition each from
// GOMAXPROCS goroutines, one group each; Badger batches concurrent commits.
func BenchmarkCommitOffsetsParallel(b *testing.B) {
	benchStores(b, func(b *testing.B, s *Store) {
		var next atomic.Int32
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			group := fmt.Sprintf("bench-group-%d", next.Add(1))
			offs := []GroupOffset{off("orders", 0, 0)}
			for i := 0; pb.Next(); i++ {
				offs[0].Partition = int32(i % 64)
				offs[0].Offset = int64(i)
				if err := s.CommitOffsets(group, offs); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
}

// BenchmarkPutGroupMeta: the fsynced path, for comparison.
func BenchmarkPutGroupMeta(b *testing.B) {
	benchStores(b, func(b *testing.B, s *Store) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := s.PutGroupMeta(GroupMeta{Group: "bench-group", ProtocolType: "consumer", Generation: int32(i)}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	})
}
