package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/batch"
)

// adminClient is a kgo client for the topic's set-up and the read-back
// (never for the measured load). Its versions stop at Kafka 3.0's, so that
// the read-back's Fetch names topics (v13 and later address them by id).
func adminClient(addr string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("produce-bench-admin"),
		kgo.MaxVersions(kversion.V3_0_0()))
}

// createTopic creates topic with partitions partitions and waits until
// Metadata names a leader for each.
func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			t := md.Topics[topic]
			ready := t.Err == nil && len(t.Partitions) == partitions
			for _, p := range t.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s has no leader for every partition after 30 s (%v)", topic, err)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// deleteTopic deletes topic, so that the next cell's data does not pile
// up on the disk (or in kfake's memory).
func deleteTopic(ctx context.Context, cl *kgo.Client, topic string) error {
	resp, err := kadm.NewClient(cl).DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("deleting %s: %w", topic, err)
	}
	return nil
}

// stored is what a read-back found in a topic.
type stored struct {
	bytes   int64 // batch bytes (12 + Length each)
	records int64 // records counted in batch headers
	end     int64 // sum of the partitions' end offsets
}

// readBack fetches every partition of topic from offset 0 to its end and
// sums its batches, without decompressing them.
func readBack(ctx context.Context, cl *kgo.Client, topic string, partitions int) (stored, error) {
	var s stored
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return s, fmt.Errorf("listing the end offsets of %s: %w", topic, err)
	}
	for p := range partitions {
		o, ok := ends.Lookup(topic, int32(p))
		if !ok || o.Err != nil {
			return s, fmt.Errorf("end offset of %s/%d: %v", topic, p, o.Err)
		}
		s.end += o.Offset
		for off := int64(0); off < o.Offset; {
			next, n, recs, err := fetchFrom(ctx, cl, topic, int32(p), off)
			if err != nil {
				return s, err
			}
			if next <= off {
				return s, fmt.Errorf("fetch of %s/%d at %d returned no batch", topic, p, off)
			}
			off, s.bytes, s.records = next, s.bytes+n, s.records+recs
		}
	}
	return s, nil
}

// fetchFrom fetches one partition at off and returns the offset after the
// last whole batch, the batches' bytes and records.
func fetchFrom(ctx context.Context, cl *kgo.Client, topic string, part int32, off int64) (int64, int64, int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 100
	req.MaxBytes = 8 << 20
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = part, off, 4<<20
	t.Partitions = append(t.Partitions, fp)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("fetching %s/%d at %d: %w", topic, part, off, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, 0, 0, errors.New("fetch response without the partition asked for")
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return 0, 0, 0, fmt.Errorf("fetching %s/%d at %d: %w", topic, part, off, err)
	}
	// The iterator checks each batch's CRC32C; a partial batch at the end
	// of the response ends it without an error (Incomplete).
	next, n, recs := off, int64(0), int64(0)
	it := batch.NewIterator(rp.RecordBatches)
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		next, n, recs = b.NextOffset(), n+int64(b.Size()), recs+int64(b.RecordCount())
	}
	if err := it.Err(); err != nil {
		return 0, 0, 0, fmt.Errorf("batches of %s/%d at %d: %w", topic, part, off, err)
	}
	return next, n, recs, nil
}
