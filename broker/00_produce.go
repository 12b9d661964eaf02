package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"
)

// errReadOnlyTopic is the answer to a write to a mirror topic (Produce,
// AddPartitionsToTxn, CreatePartitions): POLICY_VIOLATION (44), with a
// message naming the mirror.
//
// KIP-1279's READ_ONLY_TOPIC is the prototype's 134, a code Apache Kafka
// has not released for it: Kafka 4.4 assigned 134 to GROUP_DELETION_FAILED
// (Java 4.4 clients throw GroupDeletionFailedException), Java 3.9 decodes
// it as UnknownServerException and librdkafka prints "Err-134?". Until
// Kafka releases the KIP's codes, a refusal must be one every released
// client already knows and does not retry. POLICY_VIOLATION is: in Java it
// is PolicyViolationException, not a RetriableException (the producer
// fails the batch at once, and it is not one of the errors that make a
// producer fatal); in franz-go kerr.PolicyViolation is not retriable; in
// librdkafka it is not in the produce handler's retriable list, so it is a
// permanent delivery failure ("Broker: Policy violation"); all of them
// since Kafka 0.10.2. Its meaning fits: the broker's policy refuses the
// request, not the client's credentials (TOPIC_AUTHORIZATION_FAILED would
// send operators hunting for a missing ACL).
var errReadOnlyTopic = kerr.PolicyViolation.Code

// Produce: v3-13
//
// Behavior:
// Each partition's records must be exactly one valid record batch (magic
// 2, CRC32C checked) no larger than the topic's max.message.bytes. The
// batch is appended at the log end with this node's leader epoch;
// idempotent batches go through producer state (sequence and epoch checks;
// a retried batch already appended answers with its original offsets).
// A partition the metadata image gives to another node answers
// NOT_LEADER_OR_FOLLOWER, from v10 with the leader and its epoch in
// CurrentLeader and its endpoint in NodeEndpoints (KIP-951), as Kafka.
// Partitions of a mirror topic answer POLICY_VIOLATION (errReadOnlyTopic:
// READ_ONLY_TOPIC in the KIP) until failover. On a compacted topic
// (cleanup.policy holds compact) a batch with a record without a key is
// refused whole with INVALID_RECORD and per-record errors, as Kafka does
// (refuseKeyless); only then are records read, decompressed if need be.
// With acks=0 nothing is answered. acks=1 answers once the batch is in
// the log; acks=all (-1) once the high watermark covers it too
// (Partition.AwaitCommitted: Kafka's DelayedProduce), else
// REQUEST_TIMED_OUT after the request's timeout. On one node the two
// answer alike and at once: every append raises the high watermark to the
// log end before its answer (Partition.Appended). A replicated leader
// waits in AwaitCommitted for its in-sync replicas, and answers
// NOT_LEADER_OR_FOLLOWER when it stops leading the partition (or leads it
// in a newer epoch) before they hold the batch: it may have been
// truncated away. A partition whose assignment names another node (the
// image lagging the assignment) is refused so too. acks=all to a
// partition with fewer in-sync replicas than its min.insync.replicas is
// refused before the append (NOT_ENOUGH_REPLICAS), and answered
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below it while the
// produce waited, as Kafka's.
//
// Authorization: WRITE on each topic, else TOPIC_AUTHORIZATION_FAILED for
// its partitions (after UNKNOWN_TOPIC_ID for an unknown topic ID, before
// any other check, so a topic's existence is not revealed). Transactional
// batches also need WRITE on the request's transactional id, else every
// partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Idempotence is
// checked at InitProducerId, as in Kafka since 2.8.
//
// Version notes:
// v3 is the floor (record batch v2, as Kafka 4.0); v9 flexible; v13 names
// topics by ID.
func init() { regKey(produceKey, 3, 13, (*Broker).handleProduce) }

const produceKey = 0

func (b *Broker) handleProduce(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	b.stats.ProduceRequests.Add(1)
	badAcks := req.Acks != 0 && req.Acks != 1 && req.Acks != -1
	az := b.authz(r)
	txnDenied := az.produceTxnDenied(req)
	im := b.image()
	var leaders []int32    // of the NOT_LEADER_OR_FOLLOWER partitions, v10+
	var deadline time.Time // of acks=all waits, set at the first one
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := b.partitions.Topic(rt.Topic)
		if req.Version >= 13 {
			t = b.partitions.TopicByID(rt.TopicID)
		}
		it := imageTopic(im, t)
		writeDenied := !txnDenied && az.produceTopicDenied(req.Version, rt.Topic, t)
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			// Kafka answers a refused partition with INVALID_OFFSET (-1),
			// not offset 0.
			sp.BaseOffset = -1
			switch {
			case txnDenied:
				sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			case writeDenied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case badAcks:
				sp.ErrorCode = kerr.InvalidRequiredAcks.Code
			case t == nil && req.Version >= 13:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions()):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case otherLeader(im, it, rp.Partition) != nil:
				ip := otherLeader(im, it, rp.Partition)
				sp.ErrorCode, sp.ErrorMessage = kerr.NotLeaderForPartition.Code, &notLeaderMsg
				if req.Version >= 10 {
					sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = ip.Leader, ip.LeaderEpoch
					leaders = append(leaders, ip.Leader)
				}
			case t.ReadOnly():
				sp.ErrorCode = errReadOnlyTopic
				msg := "topic " + t.Name() + " is mirrored by cluster mirror " + t.Mirror() + " and read-only until failover"
				sp.ErrorMessage = &msg
			default:
				p := t.Partitions()[rp.Partition]
				minISR := 0
				if req.Acks == -1 {
					if minISR = b.MinInsyncReplicas(t.Name()); p.ISRSize() < minISR {
						sp.ErrorCode = kerr.NotEnoughReplicas.Code
						msg := fmt.Sprintf("the partition has %d in-sync replicas, fewer than min.insync.replicas=%d", p.ISRSize(), minISR)
						sp.ErrorMessage = &msg
						break
					}
				}
				if end, lead := b.producePartition(r, p, rp.Records, &sp); req.Acks == -1 && end > 0 {
					b.produceAcksAll(p, end, lead, &sp, &deadline, req.TimeoutMillis, minISR)
				}
			}
			if sp.ErrorCode != 0 {
				b.stats.ProduceErrors.Add(1)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(leaders) > 0 {
		resp.Brokers = leaderEndpoints(im, leaders, r.conn.Listener(), func(id int32, l meta.Listener, rack *string) kmsg.ProduceResponseBroker {
			return kmsg.ProduceResponseBroker{NodeID: id, Host: l.Host, Port: l.Port, Rack: rack}
		})
	}
	if req.Acks == 0 {
		r.noResponse = true
		return nil, nil
	}
	return resp, nil
}

// producePartition appends one partition's batch and fills its answer. It
// returns the end of the batch in the log (its last offset + 1) and the
// leadership it was appended in, 0 when it was refused.
func (b *Broker) producePartition(r *request, p *partition.Partition, records []byte, sp *kmsg.ProduceResponseTopicPartition) (int64, partition.Leadership) {
	var lead partition.Leadership
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
	if len(records) < batch.HeaderSize {
		b.refuseBatch(r, p, sp, kerr.CorruptMessage.Code,
			fmt.Sprintf("%d bytes of records: a record batch has a %d-byte header", len(records), batch.HeaderSize))
		return 0, lead
	}
	if max := p.MaxMessageBytes(); len(records) > int(max) {
		b.refuseBatch(r, p, sp, kerr.MessageTooLarge.Code,
			fmt.Sprintf("the batch is %d bytes, above max.message.bytes %d of topic %s", len(records), max, p.Topic().Name()))
		return 0, lead
	}
	// Parse refuses trailing bytes as corruption; Kafka's answer to a
	// second batch is INVALID_RECORD, so find the first batch's end first.
	it := batch.NewIterator(records)
	it.SkipCRC()
	if _, ok := it.Next(); ok && it.Consumed() < len(records) {
		sp.ErrorCode = kerr.InvalidRecord.Code
		msg := "a produce request must hold exactly one record batch per partition"
		sp.ErrorMessage = &msg
		return 0, lead
	}
	bt, err := batch.Parse(records)
	// A compacted topic's records are read (decompressed if needed) for
	// their keys; every other topic keeps the batch opaque, so its
	// produce path costs what it did before the check.
	if err == nil && p.Compact() && !bt.IsControl() {
		if err = bt.Verify(); err == nil {
			var refused bool
			if refused, err = refuseKeyless(p, bt, sp); refused {
				return 0, lead
			}
		}
	}
	if err == nil && p.LogAppendTime() {
		if err = bt.Verify(); err == nil {
			sp.LogAppendTime = time.Now().UnixMilli()
			bt.SetLogAppendTime(sp.LogAppendTime)
		}
	}
	var res storage.AppendResult
	if err == nil {
		res, lead, err = p.AppendProduce(records)
	}
	if errors.Is(err, partition.ErrNotLeader) {
		sp.ErrorCode, sp.ErrorMessage = kerr.NotLeaderForPartition.Code, &notLeaderMsg
		return 0, lead
	}
	if err != nil {
		code := produceErrorCode(err)
		if code != kerr.KafkaStorageError.Code {
			b.refuseBatch(r, p, sp, code, err.Error())
			return 0, lead
		}
		// The node's fault, not the client's: the client is told why
		// (its retries may succeed once space is back), the log says it
		// once a minute per partition for a full disk, at every append
		// for anything else (a failing disk).
		sp.ErrorCode = code
		msg := err.Error()
		sp.ErrorMessage = &msg
		if !errors.Is(err, storage.ErrNoSpace) {
			b.log.Error("produce append failed", "topic", p.Topic().Name(), "partition", p.Index(), "err", err)
		} else if ok, held := b.warnings.allow("no-space/"+p.Topic().Name()+"/"+strconv.Itoa(int(p.Index())), time.Now()); ok {
			b.log.Warn("produce refused: the disk is full (appends resume by themselves once space is freed)",
				"topic", p.Topic().Name(), "partition", p.Index(), "held_back", held, "err", err)
		}
		return 0, lead
	}
	sp.BaseOffset = res.FirstOffset
	sp.LogStartOffset = p.Log().LogStartOffset()
	if !res.Duplicate {
		b.stats.ProduceBatches.Add(int64(res.Batches))
		b.stats.ProduceBytes.Add(int64(len(records)))
		p.Appended()
	}
	return res.LastOffset + 1, lead
}

// produceAcksAll holds an acks=all answer until the partition's high
// watermark reaches end, the end of the appended batch (of the original
// one for a duplicate: Kafka waits for those too), as Kafka's
// DelayedProduce; past the deadline it answers REQUEST_TIMED_OUT, and
// NOT_LEADER_OR_FOLLOWER when the node stopped leading in lead. All
// partitions of a request share one deadline, the request's timeout from
// the first wait. On one node the high watermark is already there and
// nothing waits.
func (b *Broker) produceAcksAll(p *partition.Partition, end int64, lead partition.Leadership, sp *kmsg.ProduceResponseTopicPartition, deadline *time.Time, timeoutMs int32, minISR int) {
	if p.Log().HighWatermark() < end && deadline.IsZero() { // on one node it never is
		*deadline = time.Now().Add(time.Duration(max(timeoutMs, 0)) * time.Millisecond)
	}
	switch p.AwaitCommitted(end, lead, time.Until(*deadline), b.closing) {
	case partition.CommitTimedOut:
		sp.ErrorCode = kerr.RequestTimedOut.Code
		msg := fmt.Sprintf("the high watermark did not reach %d within the request's %d ms", end, timeoutMs)
		sp.ErrorMessage = &msg
		return
	case partition.CommitLostLeadership:
		// The batch may be gone: a follower truncates to its new leader.
		// The producer retries on the new leader (deduplicated when
		// idempotent and the batch survived there).
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		msg := "this node stopped leading the partition before its in-sync replicas held the batch"
		sp.ErrorMessage = &msg
		sp.BaseOffset = -1
		return
	}
	if n := p.ISRSize(); n < minISR {
		// In the log and committed, but the ISR shrank below the minimum
		// meanwhile: Kafka's DelayedProduce answers so, and the producer
		// retries (a duplicate for an idempotent one).
		sp.ErrorCode = kerr.NotEnoughReplicasAfterAppend.Code
		msg := fmt.Sprintf("appended, but the partition has %d in-sync replicas now, fewer than min.insync.replicas=%d", n, minISR)
		sp.ErrorMessage = &msg
	}
}

// refuseKeyless answers INVALID_RECORD for a batch to a compacted topic
// that holds records without a key, as Kafka's LogValidator does: one
// RecordErrors entry (Produce v8+; kmsg's ErrorRecords) per keyless
// record, by its index in the batch, and the partition's ErrorMessage
// summing them up, so a client fails exactly those records with the
// message and the others of the batch with the batch-level error. Nothing
// of the batch is appended. The buffers are per call: only compacted
// topics pay for them.
// Mirror appends never come here (fetch appends with AppendMirror): a
// mirrored batch is what the source accepted, byte for byte.
// REQUIRES: bt's CRC checked.
func refuseKeyless(p *partition.Partition, bt batch.Batch, sp *kmsg.ProduceResponseTopicPartition) (bool, error) {
	var keys storage.RecordKeys
	keyless, err := keys.Keyless(bt, nil)
	if err != nil || len(keyless) == 0 {
		return false, err
	}
	msg := "Compacted topic cannot accept message without key in topic partition " +
		p.Topic().Name() + "-" + strconv.Itoa(int(p.Index()))
	shown := make([]string, 0, 3)
	for _, i := range keyless {
		re := kmsg.NewProduceResponseTopicPartitionErrorRecord()
		re.RelativeOffset, re.ErrorMessage = i, &msg // BatchIndex, BatchIndexErrorMessage
		sp.ErrorRecords = append(sp.ErrorRecords, re)
		if len(shown) < cap(shown) {
			shown = append(shown, fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", i, msg))
		}
	}
	sp.ErrorCode = kerr.InvalidRecord.Code
	// Kafka's RecordValidationException text, its list in Java's
	// List.toString form.
	summary := fmt.Sprintf("One or more records have been rejected due to %d record errors in total, "+
		"and only showing the first three errors at most: [%s]", len(keyless), strings.Join(shown, ", "))
	sp.ErrorMessage = &summary
	return true, nil
}

// refuseBatch answers a batch the client got wrong with code and msg, and
// warns about it at most once a minute per client id: a client that sends
// bad batches in a loop must not flood the log (nor reach it at ERROR: the
// node is fine).
func (b *Broker) refuseBatch(r *request, p *partition.Partition, sp *kmsg.ProduceResponseTopicPartition, code int16, msg string) {
	sp.ErrorCode, sp.ErrorMessage = code, &msg
	var client, remote string
	if r.hdr != nil {
		client = string(r.hdr.ClientID)
	}
	if r.conn != nil {
		remote = r.conn.RemoteAddr()
	}
	if ok, held := b.warnings.allow("bad-batch/"+client, time.Now()); ok {
		b.log.Warn("produce refused a bad record batch (one line a minute per client)", "client_id", client,
			"remote", remote, "topic", p.Topic().Name(), "partition", p.Index(),
			"error", kerr.ErrorForCode(code), "reason", msg, "held_back", held)
	}
}

// produceErrorCode maps an append error to its Kafka code.
func produceErrorCode(err error) int16 {
	switch {
	case batch.IsCorruption(err), errors.Is(err, batch.ErrUnknownMagic):
		return kerr.CorruptMessage.Code
	case errors.Is(err, batch.ErrLegacyMagic):
		// Kafka 4 refuses message sets v0/v1 at every Produce version.
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, batch.ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, storage.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, storage.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, storage.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, storage.ErrUnknownProducerID):
		return kerr.UnknownProducerID.Code
	case errors.Is(err, storage.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, storage.ErrClosed):
		// The topic was deleted after the handler found the partition:
		// the answer a Produce after the deletion gets (retriable; the
		// client refreshes its metadata), not a storage error.
		return kerr.UnknownTopicOrPartition.Code
	}
	return kerr.KafkaStorageError.Code
}
