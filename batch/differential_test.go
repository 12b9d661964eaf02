package batch

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batches written by a real client (kgo) with every codec and read back from a
// broker (kfake) must look the same through our view as through kmsg's
// decoder, and pass our CRC check.
func TestDifferentialKgoBatches(t *testing.T) {
	t.Parallel()
	codecs := []struct {
		codec Codec
		kgo   kgo.CompressionCodec
	}{
		{CodecNone, kgo.NoCompression()},
		{CodecGzip, kgo.GzipCompression()},
		{CodecSnappy, kgo.SnappyCompression()},
		{CodecLz4, kgo.Lz4Compression()},
		{CodecZstd, kgo.ZstdCompression()},
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "diff"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	seen := map[Codec]int{}
	for _, c := range codecs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("diff"),
			kgo.ProducerBatchCompression(c.kgo), kgo.ProducerLinger(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		for i := range 40 {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i%7),
				Value: bytes.Repeat(fmt.Appendf(nil, "value %d of codec %v; ", i, c.codec), 1+i%5)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MaxWaitMillis = 64<<20, 10
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("diff")
	meta.Topics = append(meta.Topics, mt)
	metaResp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(metaResp.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "diff", metaResp.Topics[0].TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 64 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	part := resp.Topics[0].Partitions[0]
	if part.ErrorCode != 0 {
		t.Fatalf("fetch error %d", part.ErrorCode)
	}

	it := NewIterator(part.RecordBatches)
	records, next := 0, int64(0)
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		mismatch := b.BaseOffset() != kb.FirstOffset || b.Length() != kb.Length ||
			b.PartitionLeaderEpoch() != kb.PartitionLeaderEpoch || b.Magic() != kb.Magic ||
			int32(b.CRC()) != kb.CRC || b.Attributes() != kb.Attributes ||
			b.LastOffsetDelta() != kb.LastOffsetDelta || b.BaseTimestamp() != kb.FirstTimestamp ||
			b.MaxTimestamp() != kb.MaxTimestamp || b.ProducerID() != kb.ProducerID ||
			b.ProducerEpoch() != kb.ProducerEpoch || b.BaseSequence() != kb.FirstSequence ||
			b.RecordCount() != kb.NumRecords || !bytes.Equal(b.Records(), kb.Records)
		if mismatch {
			t.Fatalf("view and kmsg disagree at offset %d", b.BaseOffset())
		}
		if b.BaseOffset() != next {
			t.Fatalf("batch at %d, expected %d", b.BaseOffset(), next)
		}
		next = b.NextOffset()
		seen[b.Codec()]++
		records += int(b.RecordCount())

		// A rewritten producer id still decodes to the same records.
		cp := Batch(append([]byte(nil), b...))
		cp.RewriteProducerID()
		if cp.Verify() != nil {
			t.Fatalf("rewritten batch at %d fails its CRC", cp.BaseOffset())
		}
		for _, raw := range [][]byte{b, cp} {
			p := kmsg.NewFetchResponseTopicPartition()
			p.HighWatermark, p.RecordBatches = 1<<40, raw
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "diff"}, &p, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil || len(fp.Records) != int(b.RecordCount()) {
				t.Fatalf("kgo decoded %d records (%v), want %d", len(fp.Records), fp.Err, b.RecordCount())
			}
		}
	}
	if it.Err() != nil || it.Incomplete() {
		t.Fatalf("iteration ended with %v (incomplete=%v)", it.Err(), it.Incomplete())
	}
	if records != 40*len(codecs) {
		t.Fatalf("%d records, want %d", records, 40*len(codecs))
	}
	for _, c := range codecs {
		if seen[c.codec] == 0 {
			t.Errorf("no %v batch among the fetched ones: %v", c.codec, seen)
		}
	}
}
