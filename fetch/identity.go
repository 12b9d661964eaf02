package fetch

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"

	"github.com/kmirror/kmirror/internal/topicid"
	"github.com/kmirror/kmirror/storage"
)

// Topic identity: a source topic deleted and recreated under the same
// name holds other records at the same offsets. Fetching it by name, a
// fetcher would take the new topic's shorter log for a divergence and cut
// the copy, or append the new topic's records under the old topic id. So
// before a partition is fetched, and again whenever the source says it
// does not know the topic, the resolver checks that the source topic is
// still the one copied:
//
//   - sources with topic ids (Kafka 2.8+): the source's id must equal the
//     local topic's (mirror topics keep the source's id), and the fetcher
//     fetches by id (Fetch v13+), so a recreated topic answers
//     UNKNOWN_TOPIC_ID instead of someone else's records;
//   - older sources: the newest batch both sides hold must have the same
//     offsets and CRC32C at the source as here (the CRC covers the
//     payload, so equal CRCs mean equal bytes), checked at every start and
//     before any truncation.
//
// A topic that fails the check fails the partition for good
// (ErrNotRetriable); the local log is never touched. A topic the source
// no longer lists keeps its partitions waiting for a leader (visibly
// stalled): it may be recreated a moment later, and then fails the check
// naming both ids; if it stays deleted, the metadata sync, which checks
// with the source's topic list, fails it as deleted at the source.

// checkTopic runs the identity check of ps against the source metadata li.
func (mr *mirror) checkTopic(ps *partState, li leaderInfo) error {
	localID := ps.local.TopicID()
	ps.mu.Lock()
	verify := ps.verifyTopic
	ps.mu.Unlock()
	logNoIDs := false
	if li.topicID == [16]byte{} {
		mr.mu.Lock()
		logNoIDs = !mr.noIDsLogged[ps.tp.topic]
		mr.noIDsLogged[ps.tp.topic] = true
		mr.mu.Unlock()
	}
	if li.topicID != [16]byte{} {
		if li.topicID != localID {
			why := "the topic was deleted and recreated at the source, and the records under the new id are not the ones copied"
			if compared, err := mr.sameTopic(ps, li.leader, li.topicID); compared && err == nil {
				why = "the source's records match the copy's, so the source gave the topic an id after it was copied " +
					"(an upgrade to Kafka 2.8+); kmirror cannot change a topic's id under its consumers"
			}
			return permanent(fmt.Errorf("source topic %s has topic id %s, this copy has topic id %s: %s; the local copy is "+
				"kept. Stop the topic to keep it as it is (failover), or delete the local topic and start it again to mirror "+
				"the source topic of id %s", ps.tp.topic, topicid.String(li.topicID), topicid.String(localID), why,
				topicid.String(li.topicID)))
		}
		ps.mu.Lock()
		ps.sourceTopicID, ps.verifyTopic = li.topicID, false
		ps.mu.Unlock()
		return nil
	}
	if logNoIDs {
		mr.m.log.Info("source has no topic ids (Kafka before 2.8): fetching by name, checking the copied batches "+
			"at every start and before any truncation", "mirror", mr.cfg.Name, "topic", ps.tp.topic,
			"assigned_topic_id", topicid.String(localID))
	}
	ps.mu.Lock()
	ps.sourceTopicID, ps.noSourceIDs = [16]byte{}, true
	ps.mu.Unlock()
	if verify {
		if _, err := mr.sameTopic(ps, li.leader, [16]byte{}); err != nil {
			return err
		}
	}
	ps.mu.Lock()
	ps.verifyTopic = false
	ps.mu.Unlock()
	return nil
}

// maxIdentitySteps bounds how far back sameTopic looks for a batch that
// both sides hold whole.
const maxIdentitySteps = 8

// sameTopic checks that the newest local batch the source also holds
// (offsets within the source's log start and end) is, at the source, the
// same batch: same offsets, same length, same CRC32C; compared says
// whether a batch was compared. Nothing to compare (no overlap, a batch
// straddling the bounds) passes. A mismatch is not retriable; failures to
// ask the source are.
//
// WHY the newest: it most likely sits in the source's active segment,
// which the source's cleaner never rewrites. When the copy lags, the
// source may have compacted that batch: one whose records the source no
// longer holds at all is stepped over, and one re-encoded with some of
// its records passes when those are the copy's (storage.RetainedRecords),
// so a compacted topic does not fail the check for being compacted.
func (mr *mirror) sameTopic(ps *partState, leader int32, sourceID [16]byte) (compared bool, err error) {
	l := ps.local
	if l.LogEndOffset() == l.LogStartOffset() {
		return false, nil
	}
	start, end, err := mr.sourceOffsets(ps.tp)
	if err != nil {
		return false, fmt.Errorf("checking that source topic %s is still the one copied: %w", ps.tp.topic, err)
	}
	lo, hi := max(start, l.LogStartOffset()), min(end, l.LogEndOffset())
	var buf []byte
	for at, step := hi-1, 0; at >= lo && step < maxIdentitySteps; step++ {
		raw, _, err := l.Read(at, 1, l.LogEndOffset(), buf[:0])
		if err != nil {
			return false, fmt.Errorf("reading the local batch at %d: %w", at, err)
		}
		buf = raw
		it := batch.NewIterator(raw)
		it.SkipCRC()
		lb, ok := it.Next()
		switch {
		case !ok || lb.BaseOffset() < lo:
			return false, nil
		case lb.LastOffset() >= hi:
			at = min(at, lb.BaseOffset()) - 1
			continue
		}
		sb, err := mr.sourceBatchAt(ps.tp, leader, sourceID, lb.BaseOffset(), int32(lb.Size()))
		if err != nil {
			return false, fmt.Errorf("checking that source topic %s is still the one copied: %w", ps.tp.topic, err)
		}
		if sameBatch(lb, sb, mr.cfg.ProducerIDRewrite) {
			return true, nil
		}
		if sb != nil && sb.BaseOffset() > lb.LastOffset() {
			// The source holds nothing of this batch's offsets any more:
			// its cleaner removed them all (a recreated topic has its
			// offsets dense). An earlier batch may tell.
			at = lb.BaseOffset() - 1
			continue
		}
		if sb != nil && !mr.cfg.ProducerIDRewrite {
			// The source's cleaner may have rewritten the batch: the
			// records it kept are still the copy's, at their offsets.
			if kept, err := storage.RetainedRecords(lb, sb); err == nil && kept {
				return true, nil
			}
		}
		got := "no batch"
		if sb != nil {
			got = fmt.Sprintf("offsets %d-%d, CRC32C %08x", sb.BaseOffset(), sb.LastOffset(), sb.CRC())
		}
		return true, permanent(fmt.Errorf("source topic %s is not the one copied: at offset %d the source holds %s, this copy "+
			"offsets %d-%d, CRC32C %08x; the topic was deleted and recreated at the source (or rewritten). The local copy "+
			"is kept (topic id %s, assigned by kmirror: the source has no topic ids)", ps.tp.topic, lb.BaseOffset(), got,
			lb.BaseOffset(), lb.LastOffset(), lb.CRC(), topicid.String(ps.local.TopicID())))
	}
	return false, nil
}

// sameBatch compares a local batch with the source's. With
// producer.id.rewrite the local producer id and CRC were patched, so the
// timestamps, which the CRC covers and the rewrite leaves, stand in.
func sameBatch(local, source batch.Batch, rewritten bool) bool {
	if source == nil || source.BaseOffset() != local.BaseOffset() || source.LastOffset() != local.LastOffset() ||
		source.Size() != local.Size() {
		return false
	}
	if rewritten {
		return source.BaseTimestamp() == local.BaseTimestamp() && source.MaxTimestamp() == local.MaxTimestamp()
	}
	return source.CRC() == local.CRC()
}

// sourceBatchAt fetches the first batch at offset from the source leader;
// nil when the source holds none there.
func (mr *mirror) sourceBatchAt(tp topicPartition, leader int32, topicID [16]byte, offset int64, size int32) (batch.Batch, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, max(size, 1<<10), -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = tp.topic, topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tp.partition, offset, max(size, 1<<10)
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(mr.ctx, mr.cfg.RequestTimeout)
	defer cancel()
	kresp, err := mr.admin.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("Fetch at %d: %w", offset, err)
	}
	resp, ok := kresp.(*kmsg.FetchResponse)
	if !ok || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, errors.New("Fetch: malformed response")
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		if p.ErrorCode == kerr.OffsetOutOfRange.Code {
			return nil, nil
		}
		return nil, fmt.Errorf("Fetch at %d: %w", offset, err)
	}
	it := batch.NewIterator(p.RecordBatches)
	if b, ok := it.Next(); ok {
		return b, nil
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("source batch at %d: %w", offset, err)
	}
	return nil, nil
}
