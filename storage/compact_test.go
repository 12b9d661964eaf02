package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/codec"
	"github.com/kmirror/kmirror/internal/vfs"
)

// trec is a test record: a nil key is a null key, a nil value a tombstone.
type trec struct{ key, value []byte }

func kv(k, v string) trec   { return trec{key: []byte(k), value: []byte(v)} }
func tomb(k string) trec    { return trec{key: []byte(k)} }
func nullKey(v string) trec { return trec{value: []byte(v)} }
func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

const (
	noMarker = iota
	commitMarker
	abortMarker
)

// tbatch describes a test batch. pid 0 means no producer (-1 on the wire);
// a marker makes it a COMMIT or ABORT control batch of pid instead.
type tbatch struct {
	base   int64
	recs   []trec
	pid    int64
	seq    int32
	txn    bool
	marker int
	ts     int64 // base timestamp; 0 means 1000
	// deltas, when set, are the records' offset deltas (else 0, 1, ...),
	// as a batch the cleaner re-encoded keeps them; tsShift moves the
	// base timestamp up and every timestamp delta down by as much, so
	// each record keeps its timestamp.
	deltas  []int64
	tsShift int64
}

// encode builds the batch with its records compressed with c. Record i has
// timestamp and offset delta i and one header.
func (tb tbatch) encode(t testing.TB, c batch.Codec) []byte {
	t.Helper()
	ts := cmpOr(tb.ts, 1000)
	if tb.marker != noMarker {
		return batch.AppendTxnMarker(nil, batch.TxnMarker{BaseOffset: tb.base, ProducerID: tb.pid,
			ProducerEpoch: 1, Commit: tb.marker == commitMarker, Timestamp: ts})
	}
	var plain []byte
	last := int64(len(tb.recs) - 1)
	for i, r := range tb.recs {
		d := int64(i)
		if tb.deltas != nil {
			d, last = tb.deltas[i], tb.deltas[i]
		}
		body := []byte{0}
		body = binary.AppendVarint(body, d-tb.tsShift)
		body = binary.AppendVarint(body, d)
		body = appendNullable(body, r.key)
		body = appendNullable(body, r.value)
		body = binary.AppendVarint(body, 1)
		body = appendNullable(body, []byte("hk"))
		body = appendNullable(body, []byte{byte(d)})
		plain = binary.AppendVarint(plain, int64(len(body)))
		plain = append(plain, body...)
	}
	out := make([]byte, batch.HeaderSize)
	out, err := codec.Compress(c, plain, out)
	if err != nil {
		t.Fatal(err)
	}
	n := len(tb.recs)
	attrs := uint16(c)
	if tb.txn {
		attrs |= 0x10
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if tb.pid != 0 {
		pid, epoch, seq = tb.pid, 1, tb.seq
	}
	be := binary.BigEndian
	be.PutUint64(out[0:], uint64(tb.base))
	be.PutUint32(out[8:], uint32(len(out)-batch.LogOverhead))
	out[16] = 2
	be.PutUint16(out[21:], attrs)
	be.PutUint32(out[23:], uint32(last))
	be.PutUint64(out[27:], uint64(ts+tb.tsShift))
	be.PutUint64(out[35:], uint64(ts+last))
	be.PutUint64(out[43:], uint64(pid))
	be.PutUint16(out[51:], uint16(epoch))
	be.PutUint32(out[53:], uint32(seq))
	be.PutUint32(out[57:], uint32(n))
	be.PutUint32(out[17:], batch.Checksum(out[21:]))
	return out
}

func cmpOr(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// openCompactLog appends segs, one segment per element (the last is the
// active one), rolling by segment.ms on an injected clock. It returns the
// log and every appended batch.
func openCompactLog(t *testing.T, dir string, cfg Config, segs [][]tbatch, c batch.Codec) (*Log, [][]byte) {
	t.Helper()
	var clock atomic.Int64
	clock.Store(1_000_000)
	cfg.Compact, cfg.SegmentMs = true, 1000
	cfg.Now = func() time.Time { return time.UnixMilli(clock.Load()) }
	l := openTestLog(t, dir, cfg)
	var in [][]byte
	for _, seg := range segs {
		clock.Add(1000)
		for _, tb := range seg {
			raw := tb.encode(t, c)
			in = append(in, raw)
			if _, err := l.AppendMirror(append([]byte(nil), raw...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if l.NumSegments() != len(segs) {
		t.Fatalf("%d segments, want %d", l.NumSegments(), len(segs))
	}
	return l, in
}

// shapes describes the stored batches as base-last:count, "c" for control.
func shapes(bs []batch.Batch) []string {
	var out []string
	for _, b := range bs {
		s := fmt.Sprintf("%d-%d:%d", b.BaseOffset(), b.LastOffset(), b.RecordCount())
		if b.IsControl() {
			s += "c"
		}
		out = append(out, s)
	}
	return out
}

// survivors decodes the whole log with kgo, as a consumer would, and lists
// its records as offset:key=value (<nil> for null).
func survivors(t *testing.T, l *Log, level kgo.IsolationLevel) []string {
	t.Helper()
	var raw []byte
	for _, b := range readAll(t, l, l.LogStartOffset()) {
		raw = append(raw, b...)
	}
	p := kmsg.NewFetchResponseTopicPartition()
	p.HighWatermark, p.LastStableOffset, p.LogStartOffset = l.HighWatermark(), l.LastStableOffset(), l.LogStartOffset()
	p.RecordBatches = raw
	for _, a := range l.Producers().AbortedTxns(0, l.HighWatermark()) {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		p.AbortedTransactions = append(p.AbortedTransactions, at)
	}
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t", IsolationLevel: level},
		&p, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatalf("kgo: %v", fp.Err)
	}
	out := []string{}
	for _, r := range fp.Records {
		out = append(out, fmt.Sprintf("%d:%s=%s", r.Offset, orNil(r.Key), orNil(r.Value)))
	}
	return out
}

func orNil(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	return string(b)
}

var compactCodecs = []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLz4, batch.CodecZstd}

func TestCompact(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		cfg     Config
		segs    [][]tbatch
		now     int64
		cleaned int
		shapes  []string
		want    []string
		check   func(t *testing.T, l *Log)
	}{{
		name: "latest value wins across segments, offsets and gaps stay",
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("a", "1"), kv("b", "1"), kv("c", "1")}}, {base: 3, recs: []trec{kv("d", "1")}}},
			{{base: 4, recs: []trec{kv("a", "2"), kv("b", "2")}}},
			{{base: 6, recs: []trec{kv("a", "3")}}},
		},
		cleaned: 2,
		shapes:  []string{"0-2:1", "3-3:1", "4-5:1", "6-6:1"},
		want:    []string{"2:c=1", "3:d=1", "5:b=2", "6:a=3"},
	}, {
		name: "batches whose records all go are dropped",
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("k", "1")}}, {base: 1, recs: []trec{kv("m", "1")}}, {base: 2, recs: []trec{kv("n", "1")}}},
			{{base: 3, recs: []trec{kv("k", "2"), kv("m", "2")}}},
		},
		cleaned: 1,
		shapes:  []string{"2-2:1", "3-4:2"},
		want:    []string{"2:n=1", "3:k=2", "4:m=2"},
	}, {
		name: "the last batch of a segment stays as an empty batch",
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("k", "1")}}, {base: 1, recs: []trec{kv("m", "1"), kv("k", "x")}}},
			{{base: 3, recs: []trec{kv("k", "2"), kv("m", "2")}}},
		},
		cleaned: 1,
		shapes:  []string{"1-2:0", "3-4:2"},
		want:    []string{"3:k=2", "4:m=2"},
	}, {
		name: "the last batch of a producer stays as an empty batch",
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("p", "1")}, pid: 7, seq: 0}, {base: 1, recs: []trec{kv("q", "1"), kv("p", "x")}, pid: 7, seq: 1},
				{base: 3, recs: []trec{kv("r", "1")}}},
			{{base: 4, recs: []trec{kv("p", "2"), kv("q", "2")}}},
		},
		cleaned: 1,
		shapes:  []string{"1-2:0", "3-3:1", "4-5:2"},
		want:    []string{"3:r=1", "4:p=2", "5:q=2"},
		check: func(t *testing.T, l *Log) {
			b := readAll(t, l, 0)[0]
			if b.ProducerID() != 7 || b.ProducerEpoch() != 1 || b.BaseSequence() != 1 || b.LastOffsetDelta() != 1 || b.Codec() != batch.CodecNone {
				t.Fatalf("empty batch lost producer fields: pid %d epoch %d seq %d delta %d codec %v",
					b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), b.LastOffsetDelta(), b.Codec())
			}
		},
	}, {
		name: "tombstones stay until delete.retention.ms past their segment",
		cfg:  Config{DeleteRetentionMs: 10_000},
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("t", "v")}, ts: 1000}},
			{{base: 1, recs: []trec{tomb("t")}, ts: 2000}, {base: 2, recs: []trec{kv("u", "1")}, ts: 2000}},
			{{base: 3, recs: []trec{kv("w", "1")}, ts: 3000}},
		},
		now:     2000 + 10_000,
		cleaned: 1,
		shapes:  []string{"0-0:0", "1-1:1", "2-2:1", "3-3:1"},
		want:    []string{"1:t=<nil>", "2:u=1", "3:w=1"},
	}, {
		name: "tombstones go after delete.retention.ms",
		cfg:  Config{DeleteRetentionMs: 10_000},
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("t", "v")}, ts: 1000}},
			{{base: 1, recs: []trec{tomb("t")}, ts: 2000}, {base: 2, recs: []trec{kv("u", "1")}, ts: 2000}},
			{{base: 3, recs: []trec{kv("w", "1")}, ts: 3000}},
		},
		now:     2000 + 10_001,
		cleaned: 2,
		shapes:  []string{"0-0:0", "2-2:1", "3-3:1"},
		want:    []string{"2:u=1", "3:w=1"},
	}, {
		name: "control batches stay",
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("a", "1")}, pid: 9, txn: true}, {base: 1, pid: 9, marker: commitMarker}},
			{{base: 2, recs: []trec{kv("a", "2")}}},
		},
		cleaned: 1,
		shapes:  []string{"0-0:0", "1-1:1c", "2-2:1"},
		want:    []string{"2:a=2"},
		check: func(t *testing.T, l *Log) {
			if b := readAll(t, l, 0)[0]; !b.IsTransactional() || b.ProducerID() != 9 {
				t.Fatal("the emptied transactional batch lost its transactional bit or producer")
			}
		},
	}, {
		name: "aborted records never displace committed ones",
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("b", "1")}}},
			{{base: 1, recs: []trec{kv("b", "2")}, pid: 10, txn: true}, {base: 2, pid: 10, marker: abortMarker}},
			{{base: 3, recs: []trec{kv("z", "1")}}},
		},
		shapes: []string{"0-0:1", "1-1:1", "2-2:1c", "3-3:1"},
		want:   []string{"0:b=1", "1:b=2", "3:z=1"},
		check: func(t *testing.T, l *Log) {
			if got := survivors(t, l, kgo.ReadCommitted()); !slices.Equal(got, []string{"0:b=1", "3:z=1"}) {
				t.Fatalf("read_committed sees %v", got)
			}
		},
	}, {
		name: "open transactions hold compaction back",
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("a", "1")}}},
			{{base: 1, recs: []trec{kv("a", "2")}, pid: 11, txn: true}},
			{{base: 2, recs: []trec{kv("a", "3")}}},
		},
		shapes: []string{"0-0:1", "1-1:1", "2-2:1"},
		want:   []string{"0:a=1", "1:a=2", "2:a=3"},
	}, {
		name: "segments younger than min.compaction.lag.ms wait",
		cfg:  Config{MinCompactionLagMs: 5000},
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("a", "1")}, ts: 1000}},
			{{base: 1, recs: []trec{kv("a", "2")}, ts: 9000}},
			{{base: 2, recs: []trec{kv("a", "3")}, ts: 9500}},
		},
		now:     10_000,
		cleaned: 1,
		shapes:  []string{"0-0:0", "1-1:1", "2-2:1"},
		want:    []string{"1:a=2", "2:a=3"},
	}, {
		name: "null keys stay",
		segs: [][]tbatch{
			{{base: 0, recs: []trec{nullKey("x"), kv("a", "1"), nullKey("y")}}},
			{{base: 3, recs: []trec{kv("a", "2")}}},
		},
		cleaned: 1,
		shapes:  []string{"0-2:2", "3-3:1"},
		want:    []string{"0:<nil>=x", "2:<nil>=y", "3:a=2"},
	}, {
		name: "the active segment is never rewritten",
		segs: [][]tbatch{
			{{base: 0, recs: []trec{kv("a", "1")}}},
			{{base: 1, recs: []trec{kv("a", "2")}}, {base: 2, recs: []trec{kv("a", "3")}}},
		},
		cleaned: 1,
		shapes:  []string{"0-0:0", "1-1:1", "2-2:1"},
		want:    []string{"1:a=2", "2:a=3"},
	}}
	for _, tc := range cases {
		for _, c := range compactCodecs {
			t.Run(fmt.Sprintf("%s/codec=%v", tc.name, c), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				l, in := openCompactLog(t, dir, tc.cfg, tc.segs, c)
				defer func() { l.Close() }()
				sizeBefore := l.Size()
				inputRecords := 0
				for _, raw := range in {
					if b := batch.Batch(raw); !b.IsControl() {
						inputRecords += int(b.RecordCount())
					}
				}
				st, err := l.Compact(time.UnixMilli(cmpOr(tc.now, 20_000)))
				if err != nil {
					t.Fatal(err)
				}
				got := readAll(t, l, 0)
				if s := shapes(got); !slices.Equal(s, tc.shapes) {
					t.Fatalf("batches %v, want %v", s, tc.shapes)
				}
				want := survivors(t, l, kgo.ReadUncommitted())
				if !slices.Equal(want, tc.want) {
					t.Fatalf("kgo reads %v, want %v", want, tc.want)
				}
				if st.SegmentsCleaned != tc.cleaned || st.RecordsRemoved != int64(inputRecords-len(want)) ||
					st.BytesBefore-st.BytesAfter != sizeBefore-l.Size() || st.BatchesAfter > st.BatchesBefore {
					t.Fatalf("stats %+v (records in %d, kept %d, size %d -> %d)", st, inputRecords, len(want), sizeBefore, l.Size())
				}
				checkCompactedBatches(t, got, in, c)
				if tc.check != nil {
					tc.check(t, l)
				}

				// Compacting again finds nothing to do.
				if st, err := l.Compact(time.UnixMilli(cmpOr(tc.now, 20_000))); err != nil || st.SegmentsCleaned != 0 || st.RecordsRemoved != 0 {
					t.Fatalf("second compaction: %+v %v", st, err)
				}
				// A reopen, clean or verifying every CRC, reads the same.
				for _, unclean := range []bool{false, true} {
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					if unclean {
						os.Remove(filepath.Join(dir, cleanMarker))
					}
					l = openTestLog(t, dir, Config{Compact: true})
					if s := shapes(readAll(t, l, 0)); !slices.Equal(s, tc.shapes) {
						t.Fatalf("after reopen (unclean %v): batches %v", unclean, s)
					}
					if got := survivors(t, l, kgo.ReadUncommitted()); !slices.Equal(got, want) {
						t.Fatalf("after reopen (unclean %v): %v", unclean, got)
					}
				}
			})
		}
	}
}

// checkCompactedBatches: every batch passes its CRC; a data batch with
// records keeps the codec, an empty one has none; a batch holding as many
// records as its original is the original byte for byte.
func checkCompactedBatches(t *testing.T, got []batch.Batch, in [][]byte, c batch.Codec) {
	t.Helper()
	orig := map[int64]batch.Batch{}
	for _, raw := range in {
		orig[batch.Batch(raw).BaseOffset()] = raw
	}
	for _, b := range got {
		if err := b.Verify(); err != nil {
			t.Fatalf("batch at %d: %v", b.BaseOffset(), err)
		}
		o := orig[b.BaseOffset()]
		if o == nil || o.LastOffsetDelta() != b.LastOffsetDelta() || o.PartitionLeaderEpoch() != b.PartitionLeaderEpoch() {
			t.Fatalf("batch at %d has no original with the same offsets", b.BaseOffset())
		}
		switch {
		case b.RecordCount() == o.RecordCount():
			if !bytes.Equal(b, o) {
				t.Fatalf("untouched batch at %d was rewritten", b.BaseOffset())
			}
		case b.RecordCount() == 0 && b.Codec() != batch.CodecNone:
			t.Fatalf("empty batch at %d has codec %v", b.BaseOffset(), b.Codec())
		case b.RecordCount() > 0 && b.Codec() != c:
			t.Fatalf("batch at %d recompressed with %v, want %v", b.BaseOffset(), b.Codec(), c)
		}
	}
}

func TestCompactDisabledOrNothingToClean(t *testing.T) {
	t.Parallel()
	segs := [][]tbatch{{{base: 0, recs: []trec{kv("a", "1")}}}, {{base: 1, recs: []trec{kv("a", "2")}}}}
	l, _ := openCompactLog(t, t.TempDir(), Config{}, segs, batch.CodecNone)
	defer l.Close()
	l.cfg.Compact = false
	if st, err := l.Compact(time.UnixMilli(20_000)); err != nil || st != (CompactStats{}) {
		t.Fatalf("disabled: %+v %v", st, err)
	}
	one := openTestLog(t, t.TempDir(), Config{Compact: true})
	defer one.Close()
	if _, err := one.AppendMirror(tbatch{base: 0, recs: []trec{kv("a", "1"), kv("a", "2")}}.encode(t, batch.CodecNone)); err != nil {
		t.Fatal(err)
	}
	if st, err := one.Compact(time.UnixMilli(20_000)); err != nil || st != (CompactStats{}) {
		t.Fatalf("only an active segment: %+v %v", st, err)
	}
	for _, cfg := range []Config{{DeleteRetentionMs: -1}, {MinCompactionLagMs: -1}} {
		if _, err := Open(t.TempDir(), cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// A reader holding a region of a segment keeps reading the bytes it was
// given after compaction replaced that segment.
func TestCompactKeepsReaderRegions(t *testing.T) {
	t.Parallel()
	segs := [][]tbatch{
		{{base: 0, recs: []trec{kv("a", "1"), kv("b", "1")}}},
		{{base: 2, recs: []trec{kv("a", "2")}}},
	}
	l, in := openCompactLog(t, t.TempDir(), Config{}, segs, batch.CodecNone)
	defer l.Close()
	region, _, err := l.ReadRegion(0, 1<<20, l.HighWatermark())
	if err != nil {
		t.Fatal(err)
	}
	// Readers run throughout the compaction (and under -race).
	done, readErr := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(readErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			for off := range int64(3) {
				if _, _, err := l.Read(off, 1<<20, 3, nil); err != nil {
					readErr <- err
					return
				}
			}
		}
	}()
	st, err := l.Compact(time.UnixMilli(20_000))
	close(done)
	if err != nil || st.SegmentsCleaned != 1 {
		t.Fatalf("compact: %+v %v", st, err)
	}
	if err := <-readErr; err != nil {
		t.Fatalf("concurrent read: %v", err)
	}
	old := make([]byte, region.Length)
	if _, err := region.File.ReadAt(old, region.Offset); err != nil || !bytes.Equal(old, in[0]) {
		t.Fatalf("old region reads %d bytes (%v), changed", len(old), err)
	}
	if got := survivors(t, l, kgo.ReadUncommitted()); !slices.Equal(got, []string{"1:b=1", "2:a=2"}) {
		t.Fatalf("new readers see %v", got)
	}
}

// Crashes at the two interesting points of a swap: before the rename (a
// cleaned copy left behind) and after it (a new segment next to stale
// index files, with the recovery point lowered). Either way the reopened
// log holds one consistent version of every segment.
func TestCompactCrashRecovery(t *testing.T) {
	t.Parallel()
	segs := [][]tbatch{
		{{base: 0, recs: []trec{kv("a", "1"), kv("b", "1")}}, {base: 2, recs: []trec{kv("c", "1")}},
			{base: 3, recs: []trec{kv("d", "1"), kv("a", "x")}}},
		{{base: 5, recs: []trec{kv("a", "2"), kv("d", "2")}}},
	}
	cfg := Config{IndexIntervalBytes: 1}
	t.Run("leftover cleaned copy", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		l, _ := openCompactLog(t, dir, cfg, segs, batch.CodecZstd)
		before := survivors(t, l, kgo.ReadUncommitted())
		l.Close()
		leftover := segmentPath(dir, 0) + cleanedSuffix
		if err := os.WriteFile(leftover, []byte("half a cleaned segment"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, cleanMarker))
		l = openTestLog(t, dir, cfg)
		defer l.Close()
		if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("leftover not removed: %v", err)
		}
		if got := survivors(t, l, kgo.ReadUncommitted()); !slices.Equal(got, before) {
			t.Fatalf("after recovery %v, want %v", got, before)
		}
	})
	t.Run("stale indexes after the rename", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		ffs := vfs.NewFaultFS(vfs.Default)
		fcfg := cfg
		fcfg.FS = ffs
		l, _ := openCompactLog(t, dir, fcfg, segs, batch.CodecZstd)
		if err := l.Flush(); err != nil { // the recovery point moves past segment 0
			t.Fatal(err)
		}
		base := segmentPath(dir, 0)
		oldIndex, err := os.ReadFile(base + ".index")
		if err != nil {
			t.Fatal(err)
		}
		// The first Remove of a compaction is that of the old index files,
		// right after the rename: failing it stops the swap there.
		ffs.Fail(vfs.OpRemove, vfs.ErrInjected)
		if _, err := l.Compact(time.UnixMilli(20_000)); !errors.Is(err, ErrOffline) {
			t.Fatalf("compaction with failing removes: %v", err)
		}
		l.Close()
		ffs.Fail(vfs.OpRemove, nil)
		// Crash state: the new .log next to the old index files. Cut the
		// old offset index to the entries that still point inside the new
		// file, so that it decodes and only the recovery point tells it
		// apart from a good one.
		fi, err := os.Stat(base + ".log")
		if err != nil {
			t.Fatal(err)
		}
		var stale []byte
		for i := 0; i+offsetEntrySize <= len(oldIndex); i += offsetEntrySize {
			if int64(binary.BigEndian.Uint32(oldIndex[i+4:])) < fi.Size() {
				stale = append(stale, oldIndex[i:i+offsetEntrySize]...)
			}
		}
		if len(stale) < 2*offsetEntrySize {
			t.Fatalf("test setup: %d stale entries", len(stale)/offsetEntrySize)
		}
		if err := os.WriteFile(base+".index", stale, 0o644); err != nil {
			t.Fatal(err)
		}
		l = openTestLog(t, dir, cfg)
		defer l.Close()
		for off := int64(0); off < l.HighWatermark(); off++ {
			if _, _, err := l.Read(off, 1, l.HighWatermark(), nil); err != nil {
				t.Fatalf("read at %d: %v", off, err)
			}
		}
		want := []string{"1:b=1", "2:c=1", "5:a=2", "6:d=2"}
		if got := survivors(t, l, kgo.ReadUncommitted()); !slices.Equal(got, want) {
			t.Fatalf("after recovery %v, want %v", got, want)
		}
		if s := shapes(readAll(t, l, 0)); !slices.Equal(s, []string{"0-1:1", "2-2:1", "3-4:0", "5-6:2"}) {
			t.Fatalf("after recovery: batches %v", s)
		}
	})
}

// A batch whose records cannot be read (here: a gzip section that is not
// gzip, under a valid CRC) is kept as it is and maps nothing.
func TestCompactKeepsUndecodableBatches(t *testing.T) {
	t.Parallel()
	l, _ := openCompactLog(t, t.TempDir(), Config{}, [][]tbatch{
		{{base: 0, recs: []trec{kv("a", "1")}}, {base: 1, recs: []trec{kv("z", "0")}}},
		{{base: 2, recs: []trec{kv("z", "1")}}},
	}, batch.CodecNone)
	defer l.Close()
	bad := tbatch{base: 3, recs: []trec{kv("a", "2")}}.encode(t, batch.CodecGzip)
	bad = append(bad[:batch.HeaderSize], "not gzip at all"...)
	binary.BigEndian.PutUint32(bad[8:], uint32(len(bad)-batch.LogOverhead))
	binary.BigEndian.PutUint32(bad[17:], batch.Checksum(bad[21:]))
	if _, err := l.AppendMirror(bad); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendMirror(tbatch{base: 4, recs: []trec{kv("y", "1")}}.encode(t, batch.CodecNone)); err != nil {
		t.Fatal(err)
	}
	// Roll so that the bad batch sits in a cleanable segment.
	if err := l.roll(5); err != nil {
		t.Fatal(err)
	}
	st, err := l.Compact(time.UnixMilli(20_000))
	if err != nil {
		t.Fatal(err)
	}
	if s := shapes(readAll(t, l, 0)); !slices.Equal(s, []string{"0-0:1", "1-1:0", "2-2:1", "3-3:1", "4-4:1"}) ||
		st.SegmentsCleaned != 1 {
		t.Fatalf("batches %v, stats %+v", s, st)
	}
	if got := readAll(t, l, 3)[0]; !bytes.Equal(got, bad) {
		t.Fatal("the undecodable batch changed")
	}
}

func TestCompactStopsAtCorruption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _ := openCompactLog(t, dir, Config{}, [][]tbatch{
		{{base: 0, recs: []trec{kv("a", "1")}}, {base: 1, recs: []trec{kv("b", "1")}}},
		{{base: 2, recs: []trec{kv("a", "2")}}},
	}, batch.CodecNone)
	defer l.Close()
	// Flip a value byte of the batch at 1 on disk.
	seg := l.segments()[0]
	pos := seg.size.Load() - 3
	if _, err := seg.file.(*os.File).WriteAt([]byte{'X'}, pos); err != nil {
		t.Fatal(err)
	}
	_, err := l.Compact(time.UnixMilli(20_000))
	if !batch.IsCorruption(err) || !strings.Contains(err.Error(), "crc32c") {
		t.Fatalf("compacting a corrupt segment: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("leftover %s", e.Name())
		}
	}
	if _, err := l.AppendMirror(tbatch{base: 3, recs: []trec{kv("c", "1")}}.encode(t, batch.CodecNone)); err != nil {
		t.Fatalf("the log is unusable after a refused compaction: %v", err)
	}
}
