package bench

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/quick"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
)

// benchSizes is the size ladder of every batch benchmark and test.
var benchSizes = []struct {
	name string
	n    int
}{
	{"1KiB", 1 << 10},
	{"16KiB", 16 << 10},
	{"256KiB", 256 << 10},
	{"1MiB", 1 << 20},
}

var benchCodecs = []batch.Codec{
	batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLz4, batch.CodecZstd,
}

// genCache keeps one generated batch per codec and size. GenBatch is slow
// and deterministic, and every test and benchmark (and every -count round)
// asks for the same few batches. Each entry has its own Once so parallel
// tests generate different batches concurrently.
var genCache struct {
	sync.Mutex
	m map[genKey]*genEntry
}

type genKey struct {
	codec batch.Codec
	size  int
}

type genEntry struct {
	once sync.Once
	b    []byte
	err  error
}

// testBatch returns a private copy of GenBatch(codec, size), which the
// caller may patch.
func testBatch(tb testing.TB, codec batch.Codec, size int) []byte {
	tb.Helper()
	genCache.Lock()
	if genCache.m == nil {
		genCache.m = make(map[genKey]*genEntry)
	}
	e := genCache.m[genKey{codec, size}]
	if e == nil {
		e = new(genEntry)
		genCache.m[genKey{codec, size}] = e
	}
	genCache.Unlock()
	e.once.Do(func() { e.b, e.err = GenBatch(codec, size) })
	if e.err != nil {
		tb.Fatalf("GenBatch(%v, %d): %v", codec, size, e.err)
	}
	return slices.Clone(e.b)
}

// stdRecord is a record decoded by decodeStd.
type stdRecord struct {
	attributes  byte
	tsDelta     int64
	offsetDelta int64
	key, value  []byte
	headers     [][2][]byte
}

var errStdShort = errors.New("record bytes end early")

// stdReader is a sticky-error reader over encoding/binary varints. It is
// written independently of kmsg so tests can check our encoder (and kmsg's
// decoder in the Recompressor) against it.
type stdReader struct {
	b   []byte
	err error
}

func (r *stdReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errStdShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *stdReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errStdShort
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *stdReader) bytes() []byte {
	l := r.varint()
	if r.err != nil || l < 0 {
		return nil
	}
	if l > int64(len(r.b)) {
		r.err = errStdShort
		return nil
	}
	p := r.b[:l:l]
	r.b = r.b[l:]
	return p
}

// decodeStd decodes an uncompressed records section.
func decodeStd(raw []byte) ([]stdRecord, error) {
	var recs []stdRecord
	outer := stdReader{b: raw}
	for len(outer.b) > 0 {
		body := outer.bytes()
		if outer.err != nil {
			return nil, fmt.Errorf("record %d length: %w", len(recs), outer.err)
		}
		r := stdReader{b: body}
		var rec stdRecord
		rec.attributes = r.byte()
		rec.tsDelta = r.varint()
		rec.offsetDelta = r.varint()
		rec.key = r.bytes()
		rec.value = r.bytes()
		for range r.varint() {
			rec.headers = append(rec.headers, [2][]byte{r.bytes(), r.bytes()})
		}
		if r.err != nil {
			return nil, fmt.Errorf("record %d: %w", len(recs), r.err)
		}
		if len(r.b) != 0 {
			return nil, fmt.Errorf("record %d: %d bytes after the headers", len(recs), len(r.b))
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// checkRecords compares decoded records with the generator's.
func checkRecords(t *testing.T, got []stdRecord, want []kmsg.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("decoded %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := &got[i], &want[i]
		if g.attributes != byte(w.Attributes) || g.tsDelta != w.TimestampDelta64 ||
			g.offsetDelta != int64(w.OffsetDelta) || !bytes.Equal(g.key, w.Key) ||
			!bytes.Equal(g.value, w.Value) || len(g.headers) != len(w.Headers) {
			t.Fatalf("record %d differs:\n got %+v\nwant %+v", i, *g, *w)
		}
		for j, h := range w.Headers {
			if string(g.headers[j][0]) != h.Key || !bytes.Equal(g.headers[j][1], h.Value) {
				t.Fatalf("record %d header %d: got %q=%q, want %q=%q",
					i, j, g.headers[j][0], g.headers[j][1], h.Key, h.Value)
			}
		}
	}
}

// decompressForTest decompresses a batch's records section with fresh codecs.
func decompressForTest(t *testing.T, b batch.Batch) []byte {
	t.Helper()
	c, err := NewCodecs()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.Decompress(nil, b.Records(), b.Codec())
	if err != nil {
		t.Fatalf("decompressing: %v", err)
	}
	return raw
}

func TestVarintLen(t *testing.T) {
	t.Parallel()
	f := func(v int64) bool {
		var buf [binary.MaxVarintLen64]byte
		return varintLen(v) == binary.PutVarint(buf[:], v)
	}
	for _, v := range []int64{0, -1, 1, 63, -64, 64, -65, 8191, 8192, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64} {
		if !f(v) {
			t.Errorf("varintLen(%d) = %d, binary.PutVarint disagrees", v, varintLen(v))
		}
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 10000}); err != nil {
		t.Error(err)
	}
}

func TestRecordLength(t *testing.T) {
	t.Parallel()
	recs := append(GenRecords(100), kmsg.Record{OffsetDelta: 100}, // null key and value
		kmsg.Record{TimestampDelta: -5, Key: []byte{}, Value: []byte("v"),
			Headers: []kmsg.Header{{Key: "k"}}})
	for i := range recs {
		enc := appendRecord(nil, &recs[i])
		l, n := binary.Varint(enc)
		if n <= 0 || l != int64(recs[i].Length) || int(l) != len(enc)-n {
			t.Errorf("record %d: Length %d, encoding has length prefix %d and %d bytes after it",
				i, recs[i].Length, l, len(enc)-n)
		}
	}
}

func TestGenBatch(t *testing.T) {
	t.Parallel()
	for _, codec := range benchCodecs {
		for _, size := range benchSizes {
			t.Run(fmt.Sprintf("codec=%v/size=%s", codec, size.name), func(t *testing.T) {
				t.Parallel()
				raw := testBatch(t, codec, size.n)
				b, err := batch.Parse(raw)
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if err := b.Verify(); err != nil {
					t.Fatalf("Verify: %v", err)
				}
				// Records are ~400 bytes before compression, so even the
				// 1 KiB batch of the worst codec comes within 3/4 of target.
				if len(raw) > size.n || len(raw) < size.n*3/4 {
					t.Errorf("batch is %d bytes, want at most %d and near it", len(raw), size.n)
				}
				n := int(b.RecordCount())
				if b.Codec() != codec || b.ProducerID() != GenProducerID ||
					b.ProducerEpoch() != GenProducerEpoch || b.BaseSequence() != GenBaseSequence ||
					b.BaseOffset() != GenBaseOffset || b.PartitionLeaderEpoch() != GenLeaderEpoch ||
					b.BaseTimestamp() != GenBaseTimestamp || n < 1 || b.LastOffsetDelta() != int32(n-1) ||
					b.IsTransactional() || b.IsControl() || b.LogAppendTime() {
					t.Fatalf("unexpected header: codec %v pid %d epoch %d seq %d offset %d leader epoch %d ts %d count %d last delta %d attrs %#x",
						b.Codec(), b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), b.BaseOffset(),
						b.PartitionLeaderEpoch(), b.BaseTimestamp(), n, b.LastOffsetDelta(), b.Attributes())
				}

				// Differential: kmsg reads the same header.
				var kb kmsg.RecordBatch
				if err := kb.ReadFrom(raw); err != nil {
					t.Fatalf("kmsg.RecordBatch.ReadFrom: %v", err)
				}
				if kb.FirstOffset != b.BaseOffset() || kb.Length != b.Length() ||
					kb.PartitionLeaderEpoch != b.PartitionLeaderEpoch() || kb.Magic != 2 ||
					uint32(kb.CRC) != b.CRC() || kb.Attributes != b.Attributes() ||
					kb.LastOffsetDelta != b.LastOffsetDelta() || kb.FirstTimestamp != b.BaseTimestamp() ||
					kb.MaxTimestamp != b.MaxTimestamp() || kb.ProducerID != b.ProducerID() ||
					kb.ProducerEpoch != b.ProducerEpoch() || kb.FirstSequence != b.BaseSequence() ||
					kb.NumRecords != b.RecordCount() || !bytes.Equal(kb.Records, b.Records()) {
					t.Fatalf("kmsg reads a different header: %+v", kb)
				}

				plain := decompressForTest(t, b)
				if codec == batch.CodecGzip {
					// Differential: the standard library reads our gzip.
					zr, err := stdgzip.NewReader(bytes.NewReader(b.Records()))
					if err != nil {
						t.Fatal(err)
					}
					std, err := io.ReadAll(zr)
					if err != nil || !bytes.Equal(std, plain) {
						t.Fatalf("compress/gzip disagrees (err %v)", err)
					}
				}
				t.Logf("codec=%v size=%s: %d bytes, %d records, %d bytes uncompressed (ratio %.2f)",
					codec, size.name, len(raw), n, len(plain), float64(len(plain))/float64(len(b.Records())))
				got, err := decodeStd(plain)
				if err != nil {
					t.Fatal(err)
				}
				want := GenRecords(n)
				checkRecords(t, got, want)
				if wantMax := GenBaseTimestamp + want[n-1].TimestampDelta64; b.MaxTimestamp() != wantMax {
					t.Errorf("max timestamp %d, want %d", b.MaxTimestamp(), wantMax)
				}
			})
		}
	}
}

func TestGenBatchTooSmall(t *testing.T) {
	t.Parallel()
	if _, err := GenBatch(batch.CodecNone, batch.HeaderSize+10); !errors.Is(err, ErrTargetTooSmall) {
		t.Fatalf("got %v, want ErrTargetTooSmall", err)
	}
}
