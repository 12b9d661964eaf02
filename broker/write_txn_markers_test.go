package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteTxnMarkers, as `kafka-transactions.sh abort` (or another node's
// coordinator) sends it: the marker closes the partition's open
// transaction once the in-sync replicas hold it; a marker below the
// producer's epoch is INVALID_PRODUCER_EPOCH and writes nothing; an
// unknown partition is UNKNOWN_TOPIC_OR_PARTITION, each answered alone.
func TestWriteTxnMarkersEndsAnOpenTransaction(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newTestClient(t, b, kgo.DefaultProduceTopic("open"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceTransactional(ctx, t, b, cl, "open", 424242, 3)
	p := b.partitions.Topic("open").Partitions()[0]

	markers := func(epoch int16, topics map[string][]int32) map[string]int16 {
		t.Helper()
		mreq := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = 424242, epoch, false
		for topic, parts := range topics {
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = topic, parts
			m.Topics = append(m.Topics, mt)
		}
		mreq.Markers = append(mreq.Markers, m)
		// To the broker itself: kgo would split the request by
		// partition leader and drop what has none.
		kresp, err := cl.SeedBrokers()[0].Request(ctx, mreq)
		if err != nil {
			t.Fatal(err)
		}
		resp := kresp.(*kmsg.WriteTxnMarkersResponse)
		codes := map[string]int16{}
		for _, rt := range resp.Markers[0].Topics {
			for _, rp := range rt.Partitions {
				codes[fmt.Sprintf("%s-%d", rt.Topic, rp.Partition)] = rp.ErrorCode
			}
		}
		return codes
	}
	codes := markers(2, map[string][]int32{"open": {0}, "nope": {0}})
	if codes["open-0"] != kerr.InvalidProducerEpoch.Code || codes["nope-0"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("a stale marker and an unknown partition: %v", codes)
	}
	if lso := p.Log().LastStableOffset(); lso != 1 {
		t.Fatalf("a refused marker moved the last stable offset to %d", lso)
	}
	if codes := markers(3, map[string][]int32{"open": {0, 5}}); codes["open-0"] != 0 || codes["open-5"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("the abort: %v", codes)
	}
	if lso, hw := p.Log().LastStableOffset(), p.Log().HighWatermark(); lso != hw || hw != 3 {
		t.Fatalf("after the abort marker: last stable offset %d, high watermark %d; want both 3", lso, hw)
	}
	if ongoing := p.Log().Producers().OngoingTxns(); len(ongoing) != 0 {
		t.Fatalf("still open: %+v", ongoing)
	}
}
