package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
)

// The header fields of every generated batch: an idempotent producer in the
// middle of its life, on a partition that has seen a few leader changes.
const (
	GenProducerID    int64 = 4242
	GenProducerEpoch int16 = 7
	GenBaseSequence  int32 = 1000
	GenBaseOffset    int64 = 1 << 20
	GenLeaderEpoch   int32 = 3
	// GenBaseTimestamp is 2026-01-01T00:00:00Z in milliseconds.
	GenBaseTimestamp int64 = 1_767_225_600_000
)

// genSeed seeds the record stream. Changing it changes every generated
// batch, and so every benchmark input: keep it fixed so that runs stay
// comparable with benchstat.
const genSeed = 0x6b6d6972726f72 // "kmirror"

// ErrTargetTooSmall is returned by GenBatch when not even one record fits.
var ErrTargetTooSmall = errors.New("bench: target batch size too small for one record")

// Batch header positions this package writes. They mirror batch/batch.go
// and are part of the wire format (see the diagram in the batch package doc).
const (
	hdrBaseOffset      = 0
	hdrLength          = 8
	hdrLeaderEpoch     = 12
	hdrMagic           = 16
	hdrCRC             = 17
	hdrAttributes      = 21
	hdrLastOffsetDelta = 23
	hdrBaseTimestamp   = 27
	hdrMaxTimestamp    = 35
	hdrProducerID      = 43
	hdrProducerEpoch   = 51
	hdrBaseSequence    = 53
	hdrRecordCount     = 57
	hdrCRCStart        = hdrAttributes
	magicV2            = 2
)

// header holds the header fields a producer chooses; length, magic and CRC
// follow from the bytes.
type header struct {
	baseOffset      int64
	leaderEpoch     int32
	attributes      int16
	lastOffsetDelta int32
	baseTimestamp   int64
	maxTimestamp    int64
	producerID      int64
	producerEpoch   int16
	baseSequence    int32
	recordCount     int32
}

// headerOf reads the producer-chosen fields of b.
func headerOf(b batch.Batch) header {
	return header{
		baseOffset:      b.BaseOffset(),
		leaderEpoch:     b.PartitionLeaderEpoch(),
		attributes:      b.Attributes(),
		lastOffsetDelta: b.LastOffsetDelta(),
		baseTimestamp:   b.BaseTimestamp(),
		maxTimestamp:    b.MaxTimestamp(),
		producerID:      b.ProducerID(),
		producerEpoch:   b.ProducerEpoch(),
		baseSequence:    b.BaseSequence(),
		recordCount:     b.RecordCount(),
	}
}

// putHeader fills the first batch.HeaderSize bytes of b, a whole batch
// whose records section is already in place, and stamps the CRC32C last
// because it covers everything from the attributes on.
func putHeader(b []byte, h header) {
	be := binary.BigEndian
	be.PutUint64(b[hdrBaseOffset:], uint64(h.baseOffset))
	be.PutUint32(b[hdrLength:], uint32(len(b)-batch.LogOverhead))
	be.PutUint32(b[hdrLeaderEpoch:], uint32(h.leaderEpoch))
	b[hdrMagic] = magicV2
	be.PutUint16(b[hdrAttributes:], uint16(h.attributes))
	be.PutUint32(b[hdrLastOffsetDelta:], uint32(h.lastOffsetDelta))
	be.PutUint64(b[hdrBaseTimestamp:], uint64(h.baseTimestamp))
	be.PutUint64(b[hdrMaxTimestamp:], uint64(h.maxTimestamp))
	be.PutUint64(b[hdrProducerID:], uint64(h.producerID))
	be.PutUint16(b[hdrProducerEpoch:], uint16(h.producerEpoch))
	be.PutUint32(b[hdrBaseSequence:], uint32(h.baseSequence))
	be.PutUint32(b[hdrRecordCount:], uint32(h.recordCount))
	be.PutUint32(b[hdrCRC:], batch.Checksum(b[hdrCRCStart:]))
}

// appendHeaderSpace reserves room for a header at the end of dst.
func appendHeaderSpace(dst []byte) []byte {
	var zero [batch.HeaderSize]byte
	return append(dst, zero[:]...)
}

// GenRecords returns the first n records of the deterministic stream that
// every generated batch draws from: a batch with k records holds exactly
// GenRecords(k), whatever its codec.
//
// The records look like clickstream events from a JSON producer: a key
// "user-NNNNNN" drawn from 50,000 users, a JSON value whose field names and
// enumerations repeat but whose ids, timestamps and amounts are random, a
// content-type header on every record and a W3C traceparent header on one
// in four; about 390 bytes per encoded record. A batch of them compresses
// about 3x with snappy and lz4 and 5x with gzip and zstd, typical of real
// JSON topics.
func GenRecords(n int) []kmsg.Record {
	g := newRecordGen()
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i] = g.next(i)
	}
	return recs
}

var (
	genEvents = [...]string{"page_view", "page_view", "page_view", "page_view",
		"search", "click", "click", "add_to_cart", "purchase", "login"}
	genCategories = [...]string{"books", "electronics", "garden", "toys",
		"grocery", "sports", "fashion", "home", "beauty", "automotive"}
	genAgents = [...]string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X)",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36",
		"okhttp/4.12.0",
	}
	genContentType = []byte("application/json")
)

// recordGen produces the record stream. Its state is the PRNG and the
// running timestamp delta.
type recordGen struct {
	rng     *rand.Rand
	tsDelta int64
}

func newRecordGen() *recordGen {
	return &recordGen{rng: rand.New(rand.NewPCG(genSeed, genSeed>>7))}
}

// next returns record i of the stream with its Length set.
func (g *recordGen) next(i int) kmsg.Record {
	r := g.rng
	// Events of one batch arrive a few milliseconds apart.
	g.tsDelta += int64(r.IntN(4))
	user := r.IntN(50_000)
	key := fmt.Appendf(nil, "user-%06d", user)
	value := fmt.Appendf(nil, `{"event_id":"%016x%016x","type":%q,"user_id":"user-%06d",`+
		`"session_id":"%08x-%04x-%04x","ts":%d,"page":"/catalog/%s/item-%d",`+
		`"price_cents":%d,"currency":"EUR","quantity":%d,"user_agent":%q,`+
		`"ab_bucket":%d,"consent":%t}`,
		r.Uint64(), r.Uint64(), genEvents[r.IntN(len(genEvents))], user,
		r.Uint32(), r.IntN(1<<16), r.IntN(1<<16), GenBaseTimestamp+g.tsDelta,
		genCategories[r.IntN(len(genCategories))], r.IntN(1_000_000),
		100+r.IntN(50_000), 1+r.IntN(5), genAgents[r.IntN(len(genAgents))],
		r.IntN(8), r.IntN(10) != 0)
	headers := []kmsg.Header{{Key: "content-type", Value: genContentType}}
	if r.IntN(4) == 0 {
		headers = append(headers, kmsg.Header{Key: "traceparent",
			Value: fmt.Appendf(nil, "00-%016x%016x-%016x-01", r.Uint64(), r.Uint64(), r.Uint64())})
	}
	rec := kmsg.Record{
		TimestampDelta64: g.tsDelta,
		TimestampDelta:   int32(g.tsDelta),
		OffsetDelta:      int32(i),
		Key:              key,
		Value:            value,
		Headers:          headers,
	}
	rec.Length = recordLength(&rec)
	return rec
}

// appendRecord sets r.Length from the other fields and appends the v2
// encoding of r to dst (kmsg.Record.AppendTo, which writes Length as given).
func appendRecord(dst []byte, r *kmsg.Record) []byte {
	r.Length = recordLength(r)
	return r.AppendTo(dst)
}

// recordLength is the size of a v2 record after its length varint:
//
//	attributes int8 | timestamp delta varlong | offset delta varint |
//	key length varint | key | value length varint | value |
//	header count varint | (key length varint | key | value length varint | value)*
//
// A nil key or value is written as length -1 with no bytes.
func recordLength(r *kmsg.Record) int32 {
	ts := r.TimestampDelta64
	if ts == 0 {
		ts = int64(r.TimestampDelta)
	}
	n := 1 + varintLen(ts) + varintLen(int64(r.OffsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return int32(n)
}

// bytesLen is the encoded size of a nullable varint-length byte field.
func bytesLen(b []byte) int {
	if b == nil {
		return 1 // varint(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

// varintLen is the size of v as a zig-zag varint (binary.PutVarint).
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// genHeader is the header of a generated batch holding recs.
func genHeader(codec batch.Codec, recs []kmsg.Record) header {
	last := &recs[len(recs)-1]
	return header{
		baseOffset:      GenBaseOffset,
		leaderEpoch:     GenLeaderEpoch,
		attributes:      int16(codec),
		lastOffsetDelta: last.OffsetDelta,
		baseTimestamp:   GenBaseTimestamp,
		// Timestamp deltas never decrease in the stream.
		maxTimestamp:  GenBaseTimestamp + last.TimestampDelta64,
		producerID:    GenProducerID,
		producerEpoch: GenProducerEpoch,
		baseSequence:  GenBaseSequence,
		recordCount:   int32(len(recs)),
	}
}

// GenBatch returns a RecordBatch v2 compressed with codec (compression as
// in Codecs), holding the first k records of GenRecords, where the batch
// of k records is at most target bytes in total and the batch of k+1 is
// larger (compressed sizes grow with k up to a few bytes of noise, so k is
// at or next to the largest count that fits). The header carries
// GenProducerID, GenProducerEpoch, GenBaseSequence, GenBaseOffset,
// GenLeaderEpoch, create-time timestamps from GenBaseTimestamp and a
// correct CRC32C. The result is the same on every call.
//
// It compresses a few dozen candidate batches to find k, so it belongs in
// setup, not in a timed loop (about a second for 1 MiB of gzip).
func GenBatch(codec batch.Codec, target int) ([]byte, error) {
	c, err := NewCodecs()
	if err != nil {
		return nil, err
	}
	defer c.Close()

	g := newRecordGen()
	var (
		recs  []kmsg.Record
		plain []byte // encoded records, uncompressed
		ends  []int  // ends[i] is len(plain) after record i
		buf   []byte
	)
	build := func(n int) ([]byte, error) {
		for len(recs) < n {
			r := g.next(len(recs))
			plain = appendRecord(plain, &r)
			recs = append(recs, r)
			ends = append(ends, len(plain))
		}
		out := appendHeaderSpace(buf[:0])
		out, err := c.Compress(out, plain[:ends[n-1]], codec)
		if err != nil {
			return nil, fmt.Errorf("compressing %d records with %v: %w", n, codec, err)
		}
		putHeader(out, genHeader(codec, recs[:n]))
		buf = out
		return out, nil
	}
	fits := func(n int) (bool, error) {
		b, err := build(n)
		return len(b) <= target, err
	}

	// Find lo that fits and hi that does not, then bisect. Batch size
	// grows with the record count for every codec (compressing one more
	// record never shrinks the output enough to matter here).
	if ok, err := fits(1); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("%w: %d bytes", ErrTargetTooSmall, target)
	}
	lo, hi := 1, max(2, target/400)
	for {
		ok, err := fits(hi)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := fits(mid)
		if err != nil {
			return nil, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	out, err := build(lo)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), out...), nil
}
