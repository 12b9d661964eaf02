package codec

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
)

var allCodecs = []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLz4, batch.CodecZstd}

// testInputs covers the empty input, short input, input spanning several
// xerial and lz4 blocks, and incompressible input.
func testInputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 100<<10)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	var text []byte
	for i := 0; len(text) < 300<<10; i++ {
		text = fmt.Appendf(text, `{"user":"user-%06d","event":"page_view","n":%d}`, i%977, i)
	}
	return map[string][]byte{
		"empty":  {},
		"byte":   {'x'},
		"short":  []byte("hello, kafka record batch"),
		"text":   text,
		"random": random,
		"zeros":  make([]byte, 1<<20),
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for name, in := range testInputs() {
		for _, c := range allCodecs {
			t.Run(fmt.Sprintf("codec=%v/input=%s", c, name), func(t *testing.T) {
				t.Parallel()
				comp, err := Compress(c, in, []byte("head"))
				if err != nil || !bytes.HasPrefix(comp, []byte("head")) {
					t.Fatalf("compress: %v (prefix kept: %v)", err, bytes.HasPrefix(comp, []byte("head")))
				}
				comp = comp[len("head"):]
				for _, maxOut := range []int{len(in), DefaultMaxOut} {
					out, err := Decompress(c, comp, []byte("pre"), maxOut)
					if err != nil {
						t.Fatalf("decompress (max %d): %v", maxOut, err)
					}
					if !bytes.Equal(out, append([]byte("pre"), in...)) {
						t.Fatalf("round trip differs: %d bytes, want %d", len(out)-3, len(in))
					}
				}
				if len(in) > 0 {
					out, err := Decompress(c, comp, []byte("pre"), len(in)-1)
					if !errors.Is(err, ErrTooLarge) || string(out) != "pre" {
						t.Fatalf("one byte over the limit: %v, %q", err, out[:min(len(out), 8)])
					}
				}
			})
		}
	}
}

// A small input that expands enormously is refused without producing more
// than the limit, for every codec.
func TestDecompressionBomb(t *testing.T) {
	t.Parallel()
	zeros := make([]byte, 32<<20)
	for _, c := range allCodecs[1:] {
		t.Run("codec="+c.String(), func(t *testing.T) {
			t.Parallel()
			bomb, err := Compress(c, zeros, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(bomb) > len(zeros)/16 {
				t.Fatalf("%d compressed bytes: not a bomb", len(bomb))
			}
			bombs := [][]byte{bomb}
			if c == batch.CodecZstd {
				// A streamed frame announces no content size, so only the
				// per-block output check can stop it.
				var buf bytes.Buffer
				zw, err := zstd.NewWriter(&buf)
				if err != nil {
					t.Fatal(err)
				}
				zw.Write(zeros)
				zw.Close()
				bombs = append(bombs, buf.Bytes())
			}
			for _, bomb := range bombs {
				for _, maxOut := range []int{0, 1, 1 << 20} {
					out, err := Decompress(c, bomb, nil, maxOut)
					if !errors.Is(err, ErrTooLarge) || len(out) != 0 {
						t.Fatalf("max %d: %v with %d bytes out", maxOut, err, len(out))
					}
				}
			}
		})
	}
}

func TestSnappyFramings(t *testing.T) {
	t.Parallel()
	in := testInputs()["text"]

	// Written: xerial framing with 32 KiB input blocks, as Java writes it.
	comp, err := Compress(batch.CodecSnappy, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	if !bytes.HasPrefix(comp, wantHeader) {
		t.Fatalf("header %x", comp[:16])
	}
	blocks := 0
	for rest := comp[16:]; len(rest) > 0; blocks++ {
		n := binary.BigEndian.Uint32(rest)
		dl, err := s2.DecodedLen(rest[4 : 4+n])
		if err != nil || dl > xerialBlockSize || (len(rest) > int(4+n) && dl != xerialBlockSize) {
			t.Fatalf("block %d decodes to %d bytes (%v)", blocks, dl, err)
		}
		rest = rest[4+n:]
	}
	if want := (len(in) + xerialBlockSize - 1) / xerialBlockSize; blocks != want {
		t.Fatalf("%d blocks, want %d", blocks, want)
	}

	// Read: our framing by an independent decoder, and back.
	if out, err := xerial.Decode(comp); err != nil || !bytes.Equal(out, in) {
		t.Fatalf("xerial package cannot read our framing: %v", err)
	}
	for name, src := range map[string][]byte{
		"xerial package": xerial.Encode(nil, in),
		"raw block":      s2.EncodeSnappy(nil, in),
	} {
		out, err := Decompress(batch.CodecSnappy, src, nil, len(in))
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("%s: %v", name, err)
		}
	}

	// Damaged framings are errors, never panics.
	for name, src := range map[string][]byte{
		"truncated header":       comp[:12],
		"truncated block length": comp[:18],
		"block past the end":     comp[:40],
		"garbage block":          append(append([]byte{}, wantHeader...), 0, 0, 0, 3, 0xFF, 0xFF, 0xFF),
	} {
		if _, err := Decompress(batch.CodecSnappy, src, nil, DefaultMaxOut); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The lz4 frame descriptor is the one Java's KafkaLZ4BlockOutputStream
// writes, so that every Java consumer version reads our frames.
func TestLz4FrameDescriptorLikeJava(t *testing.T) {
	t.Parallel()
	comp, err := Compress(batch.CodecLz4, testInputs()["text"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if magic := binary.LittleEndian.Uint32(comp); magic != 0x184D2204 {
		t.Fatalf("magic %08x", magic)
	}
	if comp[4] != lz4FLG || comp[5] != lz4BD {
		t.Fatalf("FLG %02x BD %02x, want %02x %02x", comp[4], comp[5], lz4FLG, lz4BD)
	}
}

func TestDecompressRejectsGarbage(t *testing.T) {
	t.Parallel()
	garbage := bytes.Repeat([]byte{0xA5, 0x17, 0x00, 0xFF}, 64)
	for _, c := range allCodecs[1:] {
		if _, err := Decompress(c, garbage, nil, DefaultMaxOut); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v: %v", c, err)
		}
		comp, _ := Compress(c, testInputs()["text"], nil)
		for _, cut := range []int{1, len(comp) / 2, len(comp) - 1} {
			if _, err := Decompress(c, comp[:cut], nil, DefaultMaxOut); err == nil {
				t.Errorf("%v cut at %d of %d: accepted", c, cut, len(comp))
			}
		}
	}
	for _, c := range []batch.Codec{5, 7, -1} {
		if _, err := Decompress(c, garbage, nil, 10); !errors.Is(err, ErrUnknownCodec) {
			t.Errorf("decompress codec %d: %v", c, err)
		}
		if _, err := Compress(c, garbage, nil); !errors.Is(err, ErrUnknownCodec) {
			t.Errorf("compress codec %d: %v", c, err)
		}
	}
}

// Batches written by a real client (kgo) with every codec decompress to
// records kgo itself reads the same, and our compression of those records
// is read back by kgo: both directions are compatible with Kafka clients.
func TestKgoBatches(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "codec"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kgoCodecs := map[batch.Codec]kgo.CompressionCodec{
		batch.CodecNone: kgo.NoCompression(), batch.CodecGzip: kgo.GzipCompression(),
		batch.CodecSnappy: kgo.SnappyCompression(), batch.CodecLz4: kgo.Lz4Compression(),
		batch.CodecZstd: kgo.ZstdCompression(),
	}
	for _, c := range allCodecs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("codec"),
			kgo.ProducerBatchCompression(kgoCodecs[c]), kgo.ProducerLinger(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		for i := range 60 {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i%9),
				Value:   bytes.Repeat(fmt.Appendf(nil, "value %d via %v; ", i, c), 1+i%40),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}
	raw := fetchAll(ctx, t, cluster, "codec")

	seen := map[batch.Codec]int{}
	it := batch.NewIterator(raw)
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		seen[b.Codec()]++
		want := kgoRecords(t, b)
		if len(want) != int(b.RecordCount()) {
			t.Fatalf("kgo read %d of %d records", len(want), b.RecordCount())
		}
		plain, err := Decompress(b.Codec(), b.Records(), nil, DefaultMaxOut)
		if err != nil {
			t.Fatalf("%v batch at %d: %v", b.Codec(), b.BaseOffset(), err)
		}
		if got := kgoRecords(t, withRecords(b, batch.CodecNone, plain)); !sameRecords(got, want) {
			t.Fatalf("%v batch at %d: decompressed records differ", b.Codec(), b.BaseOffset())
		}
		for _, c := range allCodecs {
			comp, err := Compress(c, plain, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := kgoRecords(t, withRecords(b, c, comp)); !sameRecords(got, want) {
				t.Fatalf("records of batch at %d recompressed with %v read differently by kgo", b.BaseOffset(), c)
			}
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	for _, c := range allCodecs {
		if seen[c] == 0 {
			t.Errorf("no %v batch fetched: %v", c, seen)
		}
	}
}

// fetchAll returns the raw record batches of partition 0 of topic.
func fetchAll(ctx context.Context, t *testing.T, cluster *kfake.Cluster, topic string) []byte {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	metaResp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(metaResp.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MaxWaitMillis = 64<<20, 10
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, metaResp.Topics[0].TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 64 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("fetch error %d", p.ErrorCode)
	}
	return resp.Topics[0].Partitions[0].RecordBatches
}

// withRecords returns a copy of b whose records section is recs,
// compressed with c, with length, codec and CRC fixed up.
func withRecords(b batch.Batch, c batch.Codec, recs []byte) []byte {
	out := append(append([]byte(nil), b[:batch.HeaderSize]...), recs...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-batch.LogOverhead))
	attrs := binary.BigEndian.Uint16(out[21:])
	binary.BigEndian.PutUint16(out[21:], attrs&^7|uint16(c))
	binary.BigEndian.PutUint32(out[17:], batch.Checksum(out[21:]))
	return out
}

type kgoRecord struct {
	offset     int64
	key, value string
	headers    string
}

func kgoRecords(t *testing.T, raw []byte) []kgoRecord {
	t.Helper()
	p := kmsg.NewFetchResponseTopicPartition()
	p.HighWatermark, p.LastStableOffset, p.RecordBatches = 1<<40, 1<<40, raw
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "codec"}, &p, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatalf("kgo: %v", fp.Err)
	}
	var out []kgoRecord
	for _, r := range fp.Records {
		out = append(out, kgoRecord{offset: r.Offset, key: string(r.Key), value: string(r.Value),
			headers: fmt.Sprint(r.Headers)})
	}
	return out
}

func sameRecords(a, b []kgoRecord) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
