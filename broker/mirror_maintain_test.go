package broker

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"
)

// A mirror topic's log is the source's: while the topic is mirrored
// neither compaction nor retention.ms nor retention.bytes removes a byte
// of it, however eagerly they are set (a compacted source topic whose
// configs the metadata sync copied is the case seen: the local cleaner
// kept 300 records of the source's 400). Released (failover), the same
// configs act at the next maintenance pass.
func TestMaintainLeavesMirrorTopicsAlone(t *testing.T) {
	t.Parallel()
	// Every batch holds keys k0..k4, so all but the last of each key is
	// obsolete; the timestamps are an hour old, past retention.ms.
	old := time.Now().Add(-time.Hour).UnixMilli()
	for _, tc := range []struct {
		name    string
		configs map[string]string
		// acted reports whether the pass after the release did its work.
		acted func(l *storage.Log, before []byte) bool
	}{
		{"compact", map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024"},
			func(l *storage.Log, before []byte) bool { return len(logBytes(t, l)) < len(before) }},
		{"retention.ms", map[string]string{"retention.ms": "60000", "segment.bytes": "1024"},
			func(l *storage.Log, _ []byte) bool { return l.LogStartOffset() > 0 }},
		{"retention.bytes", map[string]string{"retention.bytes": "1024", "segment.bytes": "1024"},
			func(l *storage.Log, _ []byte) bool { return l.LogStartOffset() > 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestBroker(t)
			const topic = "mirrored"
			if err := b.CreateMirrorTopic(topic, [16]byte{1, 2, 3}, 1, "m"); err != nil {
				t.Fatal(err)
			}
			if rejected, err := b.MergeTopicConfigs(topic, tc.configs); err != nil || len(rejected) > 0 {
				t.Fatalf("setting %v: %v %v", tc.configs, rejected, err)
			}
			mp, err := b.partitions.MirrorPartition(topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			l := mp.(*partition.Partition).Log()
			for i := range 40 {
				raw := buildBatch(-1, -1, -1, 0, old, valueRecords(5, 40)...)
				binary.BigEndian.PutUint64(raw, uint64(i*5)) // the source offset; outside the CRC
				if _, err := l.AppendMirror(raw); err != nil {
					t.Fatal(err)
				}
			}
			mp.(*partition.Partition).Appended() // as the fetcher does after its appends: the high watermark follows
			if n := l.NumSegments(); n < 5 {
				t.Fatalf("%d segments, want several closed ones for the cleaner", n)
			}
			before := logBytes(t, l)

			b.maintainOnce(time.Now())
			if got := logBytes(t, l); l.LogStartOffset() != 0 || !bytes.Equal(got, before) {
				t.Fatalf("maintenance changed a mirrored log: start %d, %d bytes (had %d)",
					l.LogStartOffset(), len(got), len(before))
			}

			if err := b.SetTopicsMirror([]string{topic}, ""); err != nil {
				t.Fatal(err)
			}
			b.maintainOnce(time.Now())
			if !tc.acted(l, before) {
				t.Fatalf("maintenance did nothing after the release: start %d, %d bytes (had %d)",
					l.LogStartOffset(), len(logBytes(t, l)), len(before))
			}
		})
	}
}

// logBytes returns every stored batch of l, from its log start to its
// high watermark, segment after segment.
func logBytes(t testing.TB, l *storage.Log) []byte {
	t.Helper()
	var out []byte
	for off := l.LogStartOffset(); off < l.HighWatermark(); {
		raw := mustRead(t, l, off, 1<<30, l.HighWatermark())
		if len(raw) == 0 {
			break
		}
		out = append(out, raw...)
		it := batch.NewIterator(raw)
		it.SkipCRC()
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			off = b.NextOffset()
		}
	}
	return out
}
