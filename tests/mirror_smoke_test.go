package tests

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
)

// fetchRaw returns the raw record batches of a partition from offset 0 to
// end, read with Fetch v11 (by topic name) from addr.
func fetchRaw(t testing.TB, ctx context.Context, addr, topic string, partition int32, end int64) []byte {
	t.Helper()
	return readRaw(t, ctx, newClient(t, addr, kgo.MaxVersions(rawFetchVersions())), -1, topic, partition, 0, end)
}

func TestMirrorSmoke(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	src := kfaketest.Source(t, kfake.SeedTopics(2, "src"))
	srcAddr := src.ListenAddrs()[0]
	p := newClient(t, srcAddr, kgo.DefaultProduceTopic("src"), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	for i := range 5000 {
		p.Produce(ctx, kgo.StringRecord(fmt.Sprint("value-", i)), nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	n := startNode(t)
	// A mirror topic has its source topic's id (the fetchers refuse
	// another: a recreated source topic).
	if err := n.b.CreateMirrorTopic("src", sourceTopic(t, ctx, newAdmin(t, srcAddr), "src").id, 2, "m1"); err != nil {
		t.Fatal(err)
	}
	m := fetch.NewManager(fetch.Config{})
	defer m.Close()
	if err := m.AddMirror(fetch.MirrorConfig{Name: "m1", Bootstrap: []string{srcAddr}, FetchWaitMax: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ends := map[int32]int64{}
	for part := int32(0); part < 2; part++ {
		local, err := n.b.Partitions().MirrorPartition("src", part)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.StartPartition("m1", "src", part, local, fetch.StartAlign); err != nil {
			t.Fatal(err)
		}
		resp := rawRequest(t, ctx, srcAddr, listLatest("src", part)).(*kmsg.ListOffsetsResponse)
		ends[part] = resp.Topics[0].Partitions[0].Offset
		if ends[part] <= 0 {
			t.Fatalf("partition %d: source log end %d after producing", part, ends[part])
		}
	}
	for part, end := range ends {
		testutil.CheckFor(t, 30*time.Second, func() error {
			st, err := m.Status("m1", "src", part)
			if err != nil {
				t.Fatal(err)
			}
			if st.LogEndOffset >= end {
				return nil
			}
			return fmt.Errorf("partition %d: %+v, want log end %d", part, st, end)
		})
		want := fetchRaw(t, ctx, srcAddr, "src", part, end)
		got := fetchRaw(t, ctx, n.addr(), "src", part, end)
		if !bytes.Equal(want, got) {
			t.Fatalf("partition %d: mirrored bytes differ (%d vs %d bytes)", part, len(got), len(want))
		}
	}
}

func listLatest(topic string, partition int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 1 // v0 answers in OldStyleOffsets, not Offset
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
