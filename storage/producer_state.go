package storage

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/kmirror/kmirror/batch"
)

// Producer state of one partition log, as Kafka's ProducerStateManager
// keeps it: per producer id the epoch and the last five batches (retries are
// answered with their original offsets, sequence gaps refused), the first
// offset of its open transaction (the last stable offset; the transactions
// failover aborts, DESIGN.md decision 5), and the aborted-transaction index
// a read_committed Fetch returns.
//
// The produce path calls CheckProduce before offsets are assigned and
// OnAppend after the append. The mirror path calls only OnAppend: source
// bytes are trusted (DESIGN.md decision 2), but their state is tracked so
// that failover finds the transactions the source left open.

// Errors of the produce-path checks. CheckProduce wraps them with details;
// the broker maps them (errors.Is) to the Kafka error codes named here.
var (
	// ErrInvalidProducerEpoch: the batch's epoch is below the producer's
	// last seen epoch (INVALID_PRODUCER_EPOCH; Kafka 2.7+ answers it for
	// idempotent and transactional batches alike).
	ErrInvalidProducerEpoch = errors.New("storage: producer epoch below the last seen epoch")
	// ErrOutOfOrderSequence: the batch's first sequence does not follow the
	// producer's last sequence (OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("storage: out of order sequence number")
	// ErrUnknownProducerID is UNKNOWN_PRODUCER_ID, for callers that need a
	// known producer. CheckProduce never returns it: since KIP-360 (Kafka
	// 2.5) a producer whose state expired is accepted at any sequence.
	ErrUnknownProducerID = errors.New("storage: unknown producer id")
	// ErrInvalidTxnState: a non-transactional batch from a producer whose
	// transaction is open (INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("storage: non-transactional batch inside an open transaction")
	// ErrTransactionCoordinatorFenced: a transaction marker whose coordinator
	// epoch is below the last one seen for the producer
	// (TRANSACTION_COORDINATOR_FENCED).
	ErrTransactionCoordinatorFenced = errors.New("storage: transaction marker from an older coordinator epoch")
)

const (
	// producerBatchesRetained: idempotent clients keep at most five
	// requests in flight, and Kafka retains as many batches per producer.
	producerBatchesRetained = 5
	// producerNoEpoch is RecordBatch.NO_PRODUCER_EPOCH.
	producerNoEpoch int16 = -1
	// producerNoSequence is RecordBatch.NO_SEQUENCE.
	producerNoSequence int32 = -1
)

// DuplicateBatch names the offsets at which a retried batch was first
// appended. The broker answers the retry with them and appends nothing.
type DuplicateBatch struct {
	BaseOffset int64
	LastOffset int64
}

// ProducerEntry is a copy of one producer's state.
type ProducerEntry struct {
	ProducerID int64
	Epoch      int16
	// LastSequence is the last sequence of the newest batch, -1 if no batch
	// of the current epoch is known.
	LastSequence int32
	// LastOffset is the last offset of the newest batch, -1 if none.
	LastOffset    int64
	LastTimestamp int64
	// CoordinatorEpoch is the coordinator epoch of the last transaction
	// marker, -1 if none was seen.
	CoordinatorEpoch int32
	// CurrentTxnFirstOffset is the first offset of the open transaction, -1
	// if none is open.
	CurrentTxnFirstOffset int64
}

// OngoingTxn is a transaction that has data in the log but no marker yet.
type OngoingTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstOffset   int64
	// CoordinatorEpoch is the producer's last known coordinator epoch, -1 if
	// it never saw a marker; a marker writer uses max(0, CoordinatorEpoch).
	CoordinatorEpoch int32
}

// AbortedTxn is one entry of the aborted-transaction index, as a
// read_committed Fetch returns it.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	// LastOffset is the offset of the ABORT marker.
	LastOffset int64
	// LastStableOffset is the last stable offset right after the marker: the
	// first offset of the oldest transaction still open, else LastOffset+1.
	LastStableOffset int64
}

// producerBatch is the metadata of one appended batch.
type producerBatch struct {
	firstSeq    int32
	lastSeq     int32
	offsetDelta int32
	lastOffset  int64
	timestamp   int64
}

func (b *producerBatch) firstOffset() int64 { return b.lastOffset - int64(b.offsetDelta) }

// producerEntry is the state of one producer id.
type producerEntry struct {
	pid              int64
	epoch            int16
	coordinatorEpoch int32
	lastTimestamp    int64
	txnFirstOffset   int64 // -1: no open transaction
	n                int   // batches in use, oldest first
	batches          [producerBatchesRetained]producerBatch
}

func newProducerEntry(pid int64) *producerEntry {
	return &producerEntry{pid: pid, epoch: producerNoEpoch, coordinatorEpoch: -1,
		lastTimestamp: -1, txnFirstOffset: -1}
}

func (e *producerEntry) lastSeq() int32 {
	if e.n == 0 {
		return producerNoSequence
	}
	return e.batches[e.n-1].lastSeq
}

// setEpoch moves the entry to epoch. Sequences restart with every epoch, so
// a change forgets the cached batches (Kafka: maybeUpdateProducerEpoch).
func (e *producerEntry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.epoch = epoch
		e.n = 0
	}
}

func (e *producerEntry) addBatch(epoch int16, b producerBatch) {
	e.setEpoch(epoch)
	if e.n == producerBatchesRetained {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = b
	e.n++
	e.lastTimestamp = b.timestamp
}

func (e *producerEntry) findBatch(firstSeq, lastSeq int32) (*producerBatch, bool) {
	for i := range e.n {
		if b := &e.batches[i]; b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			return b, true
		}
	}
	return nil, false
}

func (e *producerEntry) export() ProducerEntry {
	out := ProducerEntry{ProducerID: e.pid, Epoch: e.epoch, LastSequence: e.lastSeq(),
		LastOffset: -1, LastTimestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch,
		CurrentTxnFirstOffset: e.txnFirstOffset}
	if e.n > 0 {
		out.LastOffset = e.batches[e.n-1].lastOffset
	}
	return out
}

// producerSeqAdd returns seq+delta with Kafka's wrap: sequences run from 0
// to MaxInt32 and then start over at 0.
func producerSeqAdd(seq, delta int32) int32 {
	s := int64(seq) + int64(delta)
	if s > math.MaxInt32 {
		s -= math.MaxInt32 + 1
	}
	return int32(s)
}

// producerInSequence reports whether next directly follows last.
func producerInSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// ongoingRef locates an open transaction; the list is kept sorted by
// (firstOffset, pid) so its head is the first unstable offset.
type ongoingRef struct {
	firstOffset int64
	pid         int64
}

func compareOngoing(a, b ongoingRef) int {
	if c := cmp.Compare(a.firstOffset, b.firstOffset); c != 0 {
		return c
	}
	return cmp.Compare(a.pid, b.pid)
}

// ProducerState is the producer state of one partition log. It is safe for
// concurrent use: Fetch reads the aborted index and the first unstable
// offset while the appender updates the state.
type ProducerState struct {
	mu        sync.RWMutex
	producers map[int64]*producerEntry
	ongoing   []ongoingRef
	// aborted is sorted by LastOffset, strictly ascending (one marker per
	// offset). Markers are appended in offset order, so inserts land at the
	// end.
	aborted []AbortedTxn
	// abortedMaxSpan bounds LastOffset-FirstOffset over aborted (it may
	// overstate after truncation, which is safe). It lets a range query stop
	// scanning: an entry with LastOffset >= upper+span starts at or after upper.
	abortedMaxSpan int64
}

// NewProducerState returns an empty state.
func NewProducerState() *ProducerState {
	return &ProducerState{producers: make(map[int64]*producerEntry)}
}

// CheckProduce validates a batch a client produces, before the log assigns
// its offsets; it reads only the producer id, epoch, base sequence, last
// offset delta and the transactional and control bits, never the base
// offset. It changes nothing: OnAppend records the batch once it is stored.
//
// It answers (nil, nil) to append, a DuplicateBatch to answer a retry with
// its original offsets without appending, or an error wrapping one of the
// sentinels above. The rules are Kafka's (ProducerAppendInfo.checkSequence,
// client origin, transaction verification aside):
//
//   - no producer id: nothing to check;
//   - unknown producer: any sequence is accepted. Kafka gives an unknown
//     producer the epoch NO_PRODUCER_EPOCH, and its new-epoch rule exempts
//     that epoch from "first sequence must be 0";
//   - epoch below the known one: ErrInvalidProducerEpoch;
//   - epoch above the known one: a new epoch; its first sequence must be 0;
//   - same epoch: a batch whose (first, last) sequence matches one of the
//     five cached batches is a duplicate; otherwise its first sequence must
//     be the last sequence + 1 (MaxInt32 wraps to 0);
//   - a non-transactional batch while the producer's transaction is open:
//     ErrInvalidTxnState.
//
// A control batch (a transaction marker written by the broker) is checked
// for fencing only: its epoch must not be below the producer's (the TV0/1
// rule), nor its coordinator epoch below the last marker's.
//
// A negative base sequence with a producer id is refused with
// ErrOutOfOrderSequence; Kafka's batch validator refuses it earlier
// (INVALID_RECORD), and this keeps a bad header out of the state.
//
// REQUIRES: the batches of one produce request go through CheckProduce,
// append and OnAppend one at a time: each check sees the state left by the
// previous batch.
func (s *ProducerState) CheckProduce(b batch.Batch) (dup *DuplicateBatch, err error) {
	if !b.HasProducerID() {
		return nil, nil
	}
	pid, epoch := b.ProducerID(), b.ProducerEpoch()
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.producers[pid]
	if b.IsControl() {
		return nil, checkProducerMarker(e, b)
	}
	firstSeq := b.BaseSequence()
	if firstSeq < 0 {
		return nil, fmt.Errorf("%w: producer %d: negative base sequence %d", ErrOutOfOrderSequence, pid, firstSeq)
	}
	if e == nil {
		return nil, nil
	}
	switch {
	case epoch < e.epoch:
		return nil, fmt.Errorf("%w: producer %d: epoch %d, last seen %d", ErrInvalidProducerEpoch, pid, epoch, e.epoch)
	case epoch > e.epoch:
		if firstSeq != 0 && e.epoch != producerNoEpoch {
			return nil, fmt.Errorf("%w: producer %d: new epoch %d (was %d) starts at sequence %d, not 0",
				ErrOutOfOrderSequence, pid, epoch, e.epoch, firstSeq)
		}
	default:
		lastSeq := producerSeqAdd(firstSeq, b.LastOffsetDelta())
		if orig, ok := e.findBatch(firstSeq, lastSeq); ok {
			return &DuplicateBatch{BaseOffset: orig.firstOffset(), LastOffset: orig.lastOffset}, nil
		}
		// An entry of epoch -1 comes only from odd mirrored data; Kafka
		// accepts any sequence then, as for an unknown producer.
		if e.epoch != producerNoEpoch && !producerInSequence(e.lastSeq(), firstSeq) {
			return nil, fmt.Errorf("%w: producer %d epoch %d: sequence %d, expected %d",
				ErrOutOfOrderSequence, pid, epoch, firstSeq, producerSeqAdd(e.lastSeq(), 1))
		}
	}
	if e.txnFirstOffset >= 0 && !b.IsTransactional() {
		return nil, fmt.Errorf("%w: producer %d, transaction open since offset %d",
			ErrInvalidTxnState, pid, e.txnFirstOffset)
	}
	return nil, nil
}

// checkProducerMarker fences a COMMIT/ABORT marker about to be written.
func checkProducerMarker(e *producerEntry, b batch.Batch) error {
	if e == nil {
		return nil
	}
	if epoch := b.ProducerEpoch(); epoch < e.epoch {
		return fmt.Errorf("%w: producer %d: marker epoch %d, last seen %d",
			ErrInvalidProducerEpoch, e.pid, epoch, e.epoch)
	}
	if coord, ok := markerCoordinatorEpoch(b); ok && coord < e.coordinatorEpoch {
		return fmt.Errorf("%w: producer %d: coordinator epoch %d, last seen %d",
			ErrTransactionCoordinatorFenced, e.pid, coord, e.coordinatorEpoch)
	}
	return nil
}

// markerCoordinatorEpoch reads the coordinator epoch from the value of a
// COMMIT/ABORT marker's record (layout in batch/control.go). Every read is
// bounds-checked; ok is false for anything malformed.
func markerCoordinatorEpoch(b batch.Batch) (coord int32, ok bool) {
	if !b.IsControl() || b.Codec() != batch.CodecNone || b.RecordCount() < 1 {
		return 0, false
	}
	rec := b.Records()
	pos := 0
	// varint reads at pos; once a read fails (or pos passed the end) every
	// later one fails too.
	varint := func() (int64, bool) {
		if pos >= len(rec) {
			return 0, false
		}
		v, n := binary.Varint(rec[pos:])
		if n <= 0 {
			pos = len(rec)
			return 0, false
		}
		pos += n
		return v, true
	}
	// length | attributes (1 byte) | timestamp delta | offset delta | key
	// length | key | value length | value
	_, ok1 := varint()
	pos++
	_, ok2 := varint()
	_, ok3 := varint()
	keyLen, ok4 := varint()
	if !ok1 || !ok2 || !ok3 || !ok4 || keyLen < 0 || keyLen > int64(len(rec)-pos) {
		return 0, false
	}
	pos += int(keyLen)
	valLen, ok := varint()
	if !ok || valLen < 6 || valLen > int64(len(rec)-pos) {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(rec[pos+2:])), true
}

// OnAppend records a batch the log has stored, with its final offsets, from
// either path (produce or mirror). It never fails: whatever the bytes say
// is applied the way Kafka applies replicated data.
//
//   - A data batch with a producer id updates that producer (an epoch change
//     forgets its cached batches); a transactional one opens a transaction
//     at the batch's base offset if none is open.
//   - A COMMIT or ABORT marker closes the producer's open transaction; an
//     ABORT adds the transaction to the aborted index. A marker for an
//     unknown producer creates its entry, as in Kafka.
//   - MIRROR_PID_RESET drops every producer and every open transaction
//     (releasing the last stable offset); the aborted index is history and
//     stays.
//   - Other control types, and control batches that cannot be read, are
//     ignored.
func (s *ProducerState) OnAppend(b batch.Batch) {
	if b.IsControl() {
		s.onControl(b)
		return
	}
	if !b.HasProducerID() {
		return
	}
	pid := b.ProducerID()
	firstSeq, delta := b.BaseSequence(), b.LastOffsetDelta()
	meta := producerBatch{firstSeq: firstSeq, lastSeq: producerSeqAdd(firstSeq, delta),
		offsetDelta: delta, lastOffset: b.LastOffset(), timestamp: b.MaxTimestamp()}

	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.producers[pid]
	if e == nil {
		e = newProducerEntry(pid)
		s.producers[pid] = e
	}
	e.addBatch(b.ProducerEpoch(), meta)
	// Kafka refuses a non-transactional batch inside an open transaction
	// (CheckProduce does too); a mirrored one is stored regardless and
	// leaves the transaction open.
	if b.IsTransactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = b.BaseOffset()
		s.openTxnLocked(ongoingRef{firstOffset: e.txnFirstOffset, pid: pid})
	}
}

func (s *ProducerState) onControl(b batch.Batch) {
	typ, err := b.ControlType()
	if err != nil {
		return
	}
	switch typ {
	case batch.ControlMirrorPIDReset:
		s.mu.Lock()
		clear(s.producers)
		s.ongoing = s.ongoing[:0]
		s.mu.Unlock()
	case batch.ControlCommit, batch.ControlAbort:
		if !b.HasProducerID() {
			return
		}
		coord, coordOK := markerCoordinatorEpoch(b)
		pid, marker := b.ProducerID(), b.BaseOffset()
		s.mu.Lock()
		defer s.mu.Unlock()
		e := s.producers[pid]
		if e == nil {
			e = newProducerEntry(pid)
			s.producers[pid] = e
		}
		e.setEpoch(b.ProducerEpoch())
		if coordOK {
			e.coordinatorEpoch = coord
		}
		e.lastTimestamp = b.MaxTimestamp()
		if e.txnFirstOffset < 0 {
			// A marker without data (an empty transaction) leaves no trace
			// in the aborted index, as in Kafka.
			return
		}
		first := e.txnFirstOffset
		e.txnFirstOffset = -1
		s.closeTxnLocked(ongoingRef{firstOffset: first, pid: pid})
		if typ == batch.ControlAbort {
			lso := marker + 1
			if len(s.ongoing) > 0 {
				lso = s.ongoing[0].firstOffset
			}
			s.insertAbortedLocked(AbortedTxn{ProducerID: pid, FirstOffset: first,
				LastOffset: marker, LastStableOffset: lso})
		}
	}
}

// openTxnLocked adds r to the ongoing list. REQUIRES: s.mu held for writing.
func (s *ProducerState) openTxnLocked(r ongoingRef) {
	if n := len(s.ongoing); n == 0 || compareOngoing(s.ongoing[n-1], r) < 0 {
		s.ongoing = append(s.ongoing, r) // the usual case: offsets grow
		return
	}
	i, found := slices.BinarySearchFunc(s.ongoing, r, compareOngoing)
	if !found {
		s.ongoing = slices.Insert(s.ongoing, i, r)
	}
}

// closeTxnLocked removes r from the ongoing list. REQUIRES: s.mu held for
// writing.
func (s *ProducerState) closeTxnLocked(r ongoingRef) {
	if i, found := slices.BinarySearchFunc(s.ongoing, r, compareOngoing); found {
		s.ongoing = slices.Delete(s.ongoing, i, i+1)
	}
}

// insertAbortedLocked adds a to the aborted index, keeping it sorted by
// LastOffset. Replaying a marker already indexed replaces the entry rather
// than doubling it. REQUIRES: s.mu held for writing.
func (s *ProducerState) insertAbortedLocked(a AbortedTxn) {
	if span := a.LastOffset - a.FirstOffset; span > s.abortedMaxSpan {
		s.abortedMaxSpan = span
	}
	if n := len(s.aborted); n == 0 || s.aborted[n-1].LastOffset < a.LastOffset {
		s.aborted = append(s.aborted, a)
		return
	}
	i, found := s.searchAborted(a.LastOffset)
	if found {
		s.aborted[i] = a
		return
	}
	s.aborted = slices.Insert(s.aborted, i, a)
}

// searchAborted returns the index of the first aborted entry whose
// LastOffset is >= offset, and whether it is equal.
func (s *ProducerState) searchAborted(offset int64) (int, bool) {
	return slices.BinarySearchFunc(s.aborted, offset, func(a AbortedTxn, off int64) int {
		return cmp.Compare(a.LastOffset, off)
	})
}

// FirstUnstableOffset returns the first offset of the oldest open
// transaction. The last stable offset is the minimum of it and the high
// watermark; ok is false when no transaction is open (LSO = HW).
func (s *ProducerState) FirstUnstableOffset() (offset int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.ongoing) == 0 {
		return 0, false
	}
	return s.ongoing[0].firstOffset, true
}

// OngoingTxns lists the open transactions by first offset. Failover
// appends an ABORT marker for each.
func (s *ProducerState) OngoingTxns() []OngoingTxn {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]OngoingTxn, 0, len(s.ongoing))
	for _, r := range s.ongoing {
		t := OngoingTxn{ProducerID: r.pid, FirstOffset: r.firstOffset, ProducerEpoch: producerNoEpoch, CoordinatorEpoch: -1}
		if e := s.producers[r.pid]; e != nil {
			t.ProducerEpoch, t.CoordinatorEpoch = e.epoch, e.coordinatorEpoch
		}
		out = append(out, t)
	}
	return out
}

// AbortedTxns returns the aborted transactions a read_committed Fetch from
// fetchOffset up to (excluding) upperBound must report: those with
// LastOffset >= fetchOffset and FirstOffset < upperBound, by FirstOffset.
func (s *ProducerState) AbortedTxns(fetchOffset, upperBound int64) []AbortedTxn {
	return s.AppendAbortedTxns(nil, fetchOffset, upperBound)
}

// AppendAbortedTxns is AbortedTxns appending to dst, for callers that reuse
// a buffer.
func (s *ProducerState) AppendAbortedTxns(dst []AbortedTxn, fetchOffset, upperBound int64) []AbortedTxn {
	s.mu.RLock()
	defer s.mu.RUnlock()
	start := len(dst)
	stop := int64(math.MaxInt64)
	if upperBound <= math.MaxInt64-s.abortedMaxSpan {
		stop = upperBound + s.abortedMaxSpan
	}
	i, _ := s.searchAborted(fetchOffset)
	for ; i < len(s.aborted); i++ {
		a := s.aborted[i]
		if a.LastOffset >= stop {
			break
		}
		if a.FirstOffset < upperBound {
			dst = append(dst, a)
		}
	}
	slices.SortFunc(dst[start:], func(a, b AbortedTxn) int {
		if c := cmp.Compare(a.FirstOffset, b.FirstOffset); c != 0 {
			return c
		}
		return cmp.Compare(a.LastOffset, b.LastOffset)
	})
	return dst
}

// TruncateAbortedFrom drops the aborted entries whose marker is at or after
// offset (the log was truncated to end at offset).
func (s *ProducerState) TruncateAbortedFrom(offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := s.searchAborted(offset)
	clear(s.aborted[i:])
	s.aborted = s.aborted[:i]
}

// DropAbortedBefore drops the aborted entries whose marker is below
// logStart (retention moved the log start past them).
func (s *ProducerState) DropAbortedBefore(logStart int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := s.searchAborted(logStart)
	s.aborted = slices.Delete(s.aborted, 0, i)
}

// ExpireProducers removes the producers without an open transaction whose
// last timestamp is expirationMs (producer.id.expiration.ms) or more before
// nowMs, and returns how many it removed. Kafka's rule, including the
// comparison on the batch timestamps rather than on append time.
func (s *ProducerState) ExpireProducers(nowMs, expirationMs int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for pid, e := range s.producers {
		if e.txnFirstOffset < 0 && nowMs-e.lastTimestamp >= expirationMs {
			delete(s.producers, pid)
			n++
		}
	}
	return n
}

// Entry returns a copy of one producer's state.
func (s *ProducerState) Entry(pid int64) (ProducerEntry, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.producers[pid]
	if e == nil {
		return ProducerEntry{}, false
	}
	return e.export(), true
}

// Entries returns a copy of every producer's state, by producer id (for
// DescribeProducers).
func (s *ProducerState) Entries() []ProducerEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ProducerEntry, 0, len(s.producers))
	for _, e := range s.producers {
		out = append(out, e.export())
	}
	slices.SortFunc(out, func(a, b ProducerEntry) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// Len is the number of producers.
func (s *ProducerState) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.producers)
}

// Reset clears everything: producers, open transactions and the aborted
// index. The log calls it before rebuilding the state by replay.
func (s *ProducerState) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.producers)
	s.ongoing = nil
	s.aborted = nil
	s.abortedMaxSpan = 0
}

// ReplaceWith moves the content of from (typically fresh from LoadSnapshot
// and a replay) into s, so that readers holding s see the new state.
// REQUIRES: from is not used afterwards, and from != s.
func (s *ProducerState) ReplaceWith(from *ProducerState) {
	from.mu.Lock()
	producers, ongoing, aborted, span := from.producers, from.ongoing, from.aborted, from.abortedMaxSpan
	from.producers, from.ongoing, from.aborted, from.abortedMaxSpan = make(map[int64]*producerEntry), nil, nil, 0
	from.mu.Unlock()

	s.mu.Lock()
	s.producers, s.ongoing, s.aborted, s.abortedMaxSpan = producers, ongoing, aborted, span
	s.mu.Unlock()
}
