package tests

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/codec"
)

// A source without topic ids (Kafka before 2.8) whose cleaner compacted
// the newest batch the copy holds (dropped one record, re-encoded the
// rest uncompressed: another size and CRC, the same records at the same
// offsets) is still the topic copied: the identity check at the next start
// compares the records the source kept, and the partition goes on
// mirroring. It was FAILED as "deleted and recreated at the source".
func TestMirrorTrustCompactedSourceWithoutTopicIDs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	src, _ := startSource(t, kfake.MaxVersions(kversion.V2_7_0()))
	const topic = "squeezed"
	createTopic(t, ctx, newAdmin(t, src.ListenAddrs()[0]), topic, 1, nil)
	pr := manualProducer(t, src.ListenAddrs())
	produceBatchesTo(t, ctx, pr, topic, 0, 5, 4, "k")
	ends := listOffsets(t, ctx, newAdmin(t, src.ListenAddrs()[0]), topic, false)

	n := startCtlNode(t, "compacted", control.Config{RefreshInterval: -1})
	n.ok(ctx, createReq("m", src.ListenAddrs()[0]))
	n.ok(ctx, startReq("m", topic))
	n.waitMirrored(ctx, "m", topic, ends)

	// The source's compaction of the copy's last batch, as the identity
	// check will fetch it.
	raw := rawLog(t, ctx, n.cl, topic, ends)[0]
	var last batch.Batch
	it := batch.NewIterator(raw)
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		last = b
	}
	if last == nil {
		t.Fatal("the copy holds no batch")
	}
	compacted := dropFirstRecord(t, last)
	// The control function runs on kfake's goroutine: it reads a copy of
	// the end, which the test moves below.
	end := ends[0]
	var served atomic.Int32
	src.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		req := r.(*kmsg.FetchRequest)
		if req.MaxWaitMillis != 0 || len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 ||
			req.Topics[0].Partitions[0].FetchOffset != last.BaseOffset() {
			return nil, nil, false
		}
		served.Add(1)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		st := kmsg.NewFetchResponseTopic()
		st.Topic = req.Topics[0].Topic
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = end, end, 0
		sp.RecordBatches = compacted
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})

	n.close()
	n.open()
	ends[0] = produceBatchesTo(t, ctx, pr, topic, 0, 2, 4, "after")
	n.waitMirrored(ctx, "m", topic, ends)
	if served.Load() == 0 {
		t.Fatal("the identity check never fetched the compacted batch: the test proves nothing")
	}
}

// dropFirstRecord is b as a cleaner leaves it when its first record is
// compacted away: the other records, uncompressed, at the same offsets
// (the base offset and last offset delta kept), with a new length, record
// count and CRC.
func dropFirstRecord(t *testing.T, b batch.Batch) []byte {
	t.Helper()
	plain := b.Records()
	if b.Codec() != batch.CodecNone {
		var err error
		if plain, err = codec.Decompress(b.Codec(), plain, nil, codec.DefaultMaxOut); err != nil {
			t.Fatal(err)
		}
	}
	n, k := binary.Varint(plain)
	if k <= 0 || b.RecordCount() < 2 {
		t.Fatalf("batch at %d: %d records, cannot drop one", b.BaseOffset(), b.RecordCount())
	}
	out := append(append([]byte(nil), b[:batch.HeaderSize]...), plain[k+int(n):]...)
	be := binary.BigEndian
	be.PutUint32(out[8:], uint32(len(out)-batch.LogOverhead))
	be.PutUint16(out[21:], be.Uint16(out[21:])&^0x07) // uncompressed
	be.PutUint32(out[57:], uint32(b.RecordCount()-1))
	be.PutUint32(out[17:], batch.Checksum(out[21:]))
	return out
}
