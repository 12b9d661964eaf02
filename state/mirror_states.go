package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// PartitionState is a mirror partition's state (SPEC.md section 4, the
// later numbering). The values are part of the on-disk format: they are
// stored in mirror records (a topic's desired state) and partition states.
type PartitionState int8

// The states, numbered as in the later design (LOG_ALIGNMENT 0 ... FAILED
// 8, UNKNOWN -1), not the prototype's (LOG_TRUNCATION 0 ... FAILED 7).
const (
	StateUnknown      PartitionState = -1
	StateLogAlignment PartitionState = 0
	StateEpochFencing PartitionState = 1
	StateULERecovery  PartitionState = 2
	StateMirroring    PartitionState = 3
	StatePausing      PartitionState = 4
	StatePaused       PartitionState = 5
	StateStopping     PartitionState = 6
	StateStopped      PartitionState = 7
	StateFailed       PartitionState = 8
)

// stateNames are the states' names as DescribeClusterMirrors reports them,
// indexed by state + 1.
var stateNames = [...]string{
	"UNKNOWN", "LOG_ALIGNMENT", "EPOCH_FENCING", "ULE_RECOVERY", "MIRRORING",
	"PAUSING", "PAUSED", "STOPPING", "STOPPED", "FAILED",
}

// defined reports whether s is one of the states above.
func (s PartitionState) defined() bool { return StateUnknown <= s && s <= StateFailed }

// String returns the state's name ("MIRRORING"), or "PartitionState(n)"
// for a value that is no state.
func (s PartitionState) String() string {
	if !s.defined() {
		return fmt.Sprintf("PartitionState(%d)", int8(s))
	}
	return stateNames[s+1]
}

// ParsePartitionState returns the state named s, as String writes it (upper
// case, "UNKNOWN" included); ok is false for any other string.
func ParsePartitionState(s string) (st PartitionState, ok bool) {
	i := slices.Index(stateNames[:], s)
	if i < 0 {
		return StateUnknown, false
	}
	return PartitionState(i - 1), true
}

// CanTransition reports whether a partition may go from state from to state
// to: the transition table of SPEC.md section 4 (later numbering). A
// partition without a state is in StateUnknown. Staying in a state is
// always allowed; otherwise
//
//	-> LOG_ALIGNMENT  from UNKNOWN, STOPPED, FAILED
//	-> EPOCH_FENCING  from MIRRORING
//	-> ULE_RECOVERY   from MIRRORING
//	-> MIRRORING      from LOG_ALIGNMENT, EPOCH_FENCING, ULE_RECOVERY,
//	                  PAUSED, FAILED
//	-> PAUSING        from MIRRORING
//	-> PAUSED         from PAUSING
//	-> STOPPING       from LOG_ALIGNMENT, EPOCH_FENCING, ULE_RECOVERY,
//	                  MIRRORING, PAUSING, PAUSED, FAILED
//	-> STOPPED        from STOPPING
//	-> FAILED         from any state
//	-> UNKNOWN        never
//
// A value that is no state (String's "PartitionState(n)") can neither be
// left nor entered, not even by staying.
func CanTransition(from, to PartitionState) bool {
	if !from.defined() || !to.defined() {
		return false
	}
	if from == to {
		return true
	}
	switch to {
	case StateLogAlignment:
		return from == StateUnknown || from == StateStopped || from == StateFailed
	case StateEpochFencing, StateULERecovery, StatePausing:
		return from == StateMirroring
	case StateMirroring:
		return from == StateLogAlignment || from == StateEpochFencing || from == StateULERecovery ||
			from == StatePaused || from == StateFailed
	case StatePaused:
		return from == StatePausing
	case StateStopping:
		return from != StateUnknown && from != StateStopped
	case StateStopped:
		return from == StateStopping
	case StateFailed:
		return true
	}
	return false // StateUnknown
}

// ErrInvalidTransition marks a partition state that CanTransition does not
// allow from the stored one. Nothing was written.
var ErrInvalidTransition = errors.New("state: invalid mirror partition transition")

// MirrorPartitionState is a mirror partition's persisted state. The state
// is written before its action runs (SPEC.md section 4), so a restart
// re-runs the action of the stored state.
type MirrorPartitionState struct {
	Mirror    string
	Topic     string
	Partition int32
	// State is never StateUnknown: a partition without a record is
	// UNKNOWN, so UNKNOWN is never stored.
	State PartitionState
	// Previous is, for StateFailed only, the state a retry goes back to
	// (StateUnknown: back to LOG_ALIGNMENT); never StateFailed. Outside
	// StateFailed it is not stored and reads as StateUnknown.
	Previous PartitionState
	// RetryAttempt is, for StateFailed only, the retry count so far from
	// 1, or -1 for a failure that is not retried. Outside StateFailed it
	// is not stored and reads as 0.
	RetryAttempt int32
	// ErrorMessage says why the partition failed; free text in any state.
	ErrorMessage string
	// LastMirrorEpoch is the last source leader epoch mirrored, persisted
	// at STOPPING; -1 if unknown.
	LastMirrorEpoch int32
	// LastMirrorOffset is the local log end offset when mirroring
	// stopped; -1 if unknown.
	LastMirrorOffset int64
	// SourceOffset is the source high watermark last read for the
	// partition, and SourceOffsetTime when it was read (kept to the
	// millisecond): the last known end of the source, which Describe
	// shows, with its age, in the states without a live fetcher (PAUSED,
	// STOPPED, FAILED) and after a restart until the source answers. A
	// zero SourceOffsetTime means never read; SourceOffset is then 0.
	SourceOffset     int64
	SourceOffsetTime time.Time
}

// PutMirrorPartitionState persists p, replacing the partition's stored
// state, fsynced. It refuses, with an error wrapping ErrInvalidTransition,
// a state that CanTransition does not allow from the stored one (or from
// StateUnknown for a partition without one), and with an error wrapping
// ErrNotFound a partition of a mirror that does not exist. The check and the
// write are one transaction: of two concurrent writers, the later one is
// checked against the earlier one's state.
//
// Outside StateFailed, p's Previous and RetryAttempt are dropped (stored as
// StateUnknown and 0), so a caller that leaves FAILED by changing only
// State clears them, and the zero Previous (LOG_ALIGNMENT) of a literal
// needs no care.
//
// The source offset never goes back in time: when the stored one was read
// later than p's (a checkpoint, PutMirrorSourceOffsets, ran after the
// caller read the state it changes), the stored one is kept.
//
// It also refuses an invalid p: an invalid mirror or topic name, a negative
// partition, a State that is StateUnknown or no state, a FAILED state whose
// Previous is FAILED or no state or whose RetryAttempt is neither -1 nor
// positive, a LastMirrorEpoch or LastMirrorOffset below -1, or a source
// offset that is negative, read before 1970, or set without a time. A
// stored state that is corrupt fails the write with an error wrapping
// ErrCorrupt; delete it with DeleteMirrorPartitionStates or DeleteMirror.
func (s *Store) PutMirrorPartitionState(p MirrorPartitionState) error {
	return s.PutMirrorPartitionStates([]MirrorPartitionState{p})
}

// statesPerTxn bounds the partition states one PutMirrorPartitionStates
// transaction writes (about 100 bytes each: far below Badger's limits).
const statesPerTxn = 1000

// PutMirrorPartitionStates is PutMirrorPartitionState for many partitions
// at once, checked as it checks one: a failover of a thousand partitions
// persists their STOPPING in one write instead of a thousand. The states
// go in transactions of up to a thousand, each all or nothing: an error
// names the partition, and the transactions before it are written. Every
// state is checked before anything is written.
func (s *Store) PutMirrorPartitionStates(ps []MirrorPartitionState) error {
	puts := make([]MirrorPartitionState, len(ps))
	keys := make([][]byte, len(ps))
	for i, p := range ps {
		k := mirrorPartitionKey{p.Mirror, p.Topic, p.Partition}
		if err := checkMirrorPartitionKey(k); err != nil {
			return fmt.Errorf("state: put mirror partition state: %v", err)
		}
		if p.State != StateFailed {
			p.Previous, p.RetryAttempt = StateUnknown, 0
		}
		p.SourceOffsetTime = toMillis(p.SourceOffsetTime)
		if err := checkMirrorPartitionValue(&p); err != nil {
			return fmt.Errorf("state: put mirror partition state: mirror %q topic %q partition %d: %v",
				p.Mirror, p.Topic, p.Partition, err)
		}
		puts[i], keys[i] = p, appendMirrorPartitionKey(nil, k)
	}
	for len(puts) > 0 {
		n := min(len(puts), statesPerTxn)
		if err := s.update(func(txn tx) error {
			for i := range n {
				if err := putMirrorPartitionState(txn, keys[i], puts[i]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		puts, keys = puts[n:], keys[n:]
	}
	return nil
}

// putMirrorPartitionState writes p at key in txn, checked against the
// stored state. REQUIRES: p checked (PutMirrorPartitionStates).
func putMirrorPartitionState(txn tx, key []byte, p MirrorPartitionState) error {
	if err := mirrorExists(txn, p.Mirror); err != nil {
		return err
	}
	from, put := StateUnknown, p // put: a copy, as the txn may run again
	if _, err := getRecord(txn, key, func(v []byte) error {
		old, err := decodeMirrorPartitionState(v)
		from = old.State
		if old.SourceOffsetTime.After(put.SourceOffsetTime) {
			put.SourceOffset, put.SourceOffsetTime = old.SourceOffset, old.SourceOffsetTime
		}
		return err
	}); err != nil {
		return err
	}
	if !CanTransition(from, p.State) {
		return fmt.Errorf("%w: mirror %q topic %q partition %d: %v -> %v",
			ErrInvalidTransition, p.Mirror, p.Topic, p.Partition, from, p.State)
	}
	return txn.Set(key, appendMirrorPartitionState(nil, put))
}

// ReplaceCorruptMirrorPartitionState writes p over a stored state that
// cannot be decoded (the repair PutMirrorPartitionState refuses), fsynced:
// the controller records FAILED there, with the error, instead of leaving
// a record no one can read. p is checked as PutMirrorPartitionState
// checks it; a stored state that decodes, or none, is refused with
// ErrInvalidTransition (use PutMirrorPartitionState).
func (s *Store) ReplaceCorruptMirrorPartitionState(p MirrorPartitionState) error {
	k := mirrorPartitionKey{p.Mirror, p.Topic, p.Partition}
	if err := checkMirrorPartitionKey(k); err != nil {
		return fmt.Errorf("state: replace mirror partition state: %v", err)
	}
	p.SourceOffsetTime = toMillis(p.SourceOffsetTime)
	if err := checkMirrorPartitionValue(&p); err != nil {
		return fmt.Errorf("state: replace mirror partition state: mirror %q topic %q partition %d: %v",
			p.Mirror, p.Topic, p.Partition, err)
	}
	key := appendMirrorPartitionKey(nil, k)
	return s.update(func(txn tx) error {
		if err := mirrorExists(txn, p.Mirror); err != nil {
			return err
		}
		found, err := getRecord(txn, key, func(v []byte) error {
			_, err := decodeMirrorPartitionState(v)
			return err
		})
		if err == nil || !isCorrupt(err) {
			return fmt.Errorf("%w: mirror %q topic %q partition %d: the stored state is not corrupt (found %v, %v)",
				ErrInvalidTransition, p.Mirror, p.Topic, p.Partition, found, err)
		}
		return txn.Set(key, appendMirrorPartitionState(nil, p))
	})
}

// MirrorPartitionStates returns the stored states of mirror's partitions,
// sorted by topic, then partition; none (or no such mirror) is an empty
// result, not an error. It refuses an invalid mirror name.
func (s *Store) MirrorPartitionStates(mirror string) ([]MirrorPartitionState, error) {
	if err := checkMirrorName(mirror); err != nil {
		return nil, fmt.Errorf("state: mirror partition states: %v", err)
	}
	return scanTopicPartitions(s, mirrorPartitionPrefix(mirror), "mirror partition key", decodeMirrorPartitionState,
		func(p *MirrorPartitionState, topic string, partition int32) {
			p.Mirror, p.Topic, p.Partition = mirror, topic, partition
		})
}

// MirrorPartitionState returns the stored state of one partition, or an
// error wrapping ErrNotFound if it has none (it is then UNKNOWN), also for
// names and partitions no stored state can have.
func (s *Store) MirrorPartitionState(mirror, topic string, partition int32) (MirrorPartitionState, error) {
	k := mirrorPartitionKey{mirror, topic, partition}
	var p MirrorPartitionState
	err := s.view(func(txn tx) error {
		found := false
		if checkMirrorPartitionKey(k) == nil {
			var err error
			found, err = getRecord(txn, appendMirrorPartitionKey(nil, k), func(v []byte) error {
				var err error
				p, err = decodeMirrorPartitionState(v)
				return err
			})
			if err != nil {
				return err
			}
		}
		if !found {
			return fmt.Errorf("%w: mirror %q topic %q partition %d", ErrNotFound, mirror, topic, partition)
		}
		return nil
	})
	if err != nil {
		return MirrorPartitionState{}, err
	}
	p.Mirror, p.Topic, p.Partition = mirror, topic, partition
	return p, nil
}

// DeleteMirrorPartitionStates deletes the stored states of every partition
// of topic in mirror, for a topic that left the mirror, fsynced. A topic
// without states is a no-op. Values are not read, so corrupt ones are
// deleted too. It refuses an invalid mirror or topic name.
//
// States go in transactions of a few thousand keys each: a failure or a
// crash may leave some behind, and calling it again finishes the work.
func (s *Store) DeleteMirrorPartitionStates(mirror, topic string) error {
	if err := checkMirrorName(mirror); err != nil {
		return fmt.Errorf("state: delete mirror partition states: %v", err)
	}
	if err := checkTopicName(topic); err != nil {
		return fmt.Errorf("state: delete mirror partition states of mirror %q: %v", mirror, err)
	}
	prefix := appendGroupName(mirrorPartitionPrefix(mirror), topic)
	for {
		var more bool
		err := s.update(func(txn tx) error {
			kb := s.newKeyBatch(0)
			var err error
			if more, err = collectKeys(txn, prefix, &kb); err != nil {
				return err
			}
			return kb.deleteAll(txn)
		})
		if err != nil || !more {
			return err
		}
	}
}

// Partition state keys (see the package doc):
//
//	v1/mirror-partition/<mirror name>/<topic n><partition be32>
//
// The mirror name holds no '/', so the '/' after it ends the field and the
// prefix scan of mirror "a" sees neither "ab" nor "a.b". The topic field is
// a uvarint length and the bytes, like the group keys' fields, so a topic's
// prefix never matches a longer topic.

// mirrorPartitionKey is a partition state's key, as three fields for
// decodeMirrorPartitionKey to return and the fuzz target to compare.
type mirrorPartitionKey struct {
	Mirror    string
	Topic     string
	Partition int32
}

// mirrorPartitionPrefix is the prefix of every partition state key of
// mirror. REQUIRES: checkMirrorName(mirror) == nil.
func mirrorPartitionPrefix(mirror string) []byte {
	return []byte(keyMirrorPartitionPrefix + mirror + "/")
}

// appendMirrorPartitionKey appends the key of k.
func appendMirrorPartitionKey(dst []byte, k mirrorPartitionKey) []byte {
	dst = append(dst, keyMirrorPartitionPrefix...)
	dst = append(dst, k.Mirror...)
	dst = append(dst, '/')
	dst = appendGroupName(dst, k.Topic)
	return binary.BigEndian.AppendUint32(dst, uint32(k.Partition))
}

// checkMirrorPartitionKey holds the rules of a partition state's key
// fields, shared by the writers and the key decoder.
func checkMirrorPartitionKey(k mirrorPartitionKey) error {
	if err := checkMirrorName(k.Mirror); err != nil {
		return err
	}
	if err := checkTopicName(k.Topic); err != nil {
		return err
	}
	if k.Partition < 0 {
		return fmt.Errorf("topic %q: partition %d", k.Topic, k.Partition)
	}
	return nil
}

// decodeMirrorPartitionKey decodes a partition state key. Errors wrap
// ErrCorrupt.
func decodeMirrorPartitionKey(key []byte) (mirrorPartitionKey, error) {
	r := reader{b: key, what: "mirror partition key"}
	r.prefix(keyMirrorPartitionPrefix)
	if r.err != nil {
		return mirrorPartitionKey{}, r.err
	}
	i := bytes.IndexByte(r.b, '/')
	if i < 0 {
		r.fail("no '/' after the mirror name")
		return mirrorPartitionKey{}, r.err
	}
	mirror := string(r.b[:i])
	if err := checkMirrorName(mirror); err != nil {
		return mirrorPartitionKey{}, fmt.Errorf("%w: mirror partition key: %v", ErrCorrupt, err)
	}
	topic, partition, err := decodeTopicPartitionKeyTail(r.b[i+1:], "mirror partition key")
	if err != nil {
		return mirrorPartitionKey{}, err
	}
	return mirrorPartitionKey{mirror, topic, partition}, nil
}

// checkMirrorPartitionValue holds the rules of a partition state's value
// fields, shared by PutMirrorPartitionState and decodeMirrorPartitionState.
func checkMirrorPartitionValue(p *MirrorPartitionState) error {
	switch {
	case !p.State.defined() || p.State == StateUnknown:
		return fmt.Errorf("state %v", p.State)
	case p.State == StateFailed && (!p.Previous.defined() || p.Previous == StateFailed):
		return fmt.Errorf("FAILED with previous state %v", p.Previous)
	case p.State == StateFailed && p.RetryAttempt < 1 && p.RetryAttempt != -1:
		return fmt.Errorf("FAILED with retry attempt %d", p.RetryAttempt)
	case p.State != StateFailed && p.Previous != StateUnknown:
		return fmt.Errorf("%v with previous state %v", p.State, p.Previous)
	case p.State != StateFailed && p.RetryAttempt != 0:
		return fmt.Errorf("%v with retry attempt %d", p.State, p.RetryAttempt)
	case p.LastMirrorEpoch < -1:
		return fmt.Errorf("last mirror epoch %d", p.LastMirrorEpoch)
	case p.LastMirrorOffset < -1:
		return fmt.Errorf("last mirror offset %d", p.LastMirrorOffset)
	}
	return checkSourceOffset(p.SourceOffset, p.SourceOffsetTime)
}

// A partition state value (part of the on-disk format):
//
//	v1: | 1 | state i8 | previous i8 | retry attempt i32 | last mirror
//	    epoch i32 | last mirror offset i64 | error message (u32 n + bytes) |
//	v2: | 2 | the v1 fields | source offset i64 | source offset time i64 |
//
// The source offset time is in milliseconds since 1970, always positive.
// A value without a source offset is written as v1, so the encoding stays
// canonical (what decodes re-encodes to the same bytes) and states
// written before v2 existed read as "never read". Integers are big endian.
const mirrorPartitionFormatV2 byte = 2

// appendMirrorPartitionState appends the value of p: every field but
// Mirror, Topic and Partition, which the key holds. REQUIRES:
// checkMirrorPartitionValue(&p) == nil.
func appendMirrorPartitionState(dst []byte, p MirrorPartitionState) []byte {
	format := formatV1
	if !p.SourceOffsetTime.IsZero() {
		format = mirrorPartitionFormatV2
	}
	dst = append(dst, format, byte(p.State), byte(p.Previous))
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.RetryAttempt))
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.LastMirrorEpoch))
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.LastMirrorOffset))
	dst = appendString(dst, p.ErrorMessage)
	if format == formatV1 {
		return dst
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.SourceOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(p.SourceOffsetTime.UnixMilli()))
}

// decodeMirrorPartitionState decodes a partition state value, v1 or v2;
// Mirror, Topic and Partition are left zero (they come from the key).
// Errors wrap ErrCorrupt.
func decodeMirrorPartitionState(b []byte) (MirrorPartitionState, error) {
	r := reader{b: b, what: "mirror partition state"}
	format := byte(0)
	if len(b) > 0 {
		format = b[0]
	}
	if format == mirrorPartitionFormatV2 {
		r.b = r.b[1:]
	} else {
		r.version()
	}
	var p MirrorPartitionState
	p.State = PartitionState(r.i8())
	p.Previous = PartitionState(r.i8())
	p.RetryAttempt = int32(r.u32())
	p.LastMirrorEpoch = int32(r.u32())
	p.LastMirrorOffset = int64(r.u64())
	p.ErrorMessage = r.str()
	if format == mirrorPartitionFormatV2 {
		p.SourceOffset = int64(r.u64())
		// Any i64 is a valid UnixMilli; checkSourceOffset refuses the
		// ones no writer produces (not after 1970).
		p.SourceOffsetTime = time.UnixMilli(int64(r.u64()))
	}
	if err := r.complete(); err != nil {
		return MirrorPartitionState{}, err
	}
	if err := checkMirrorPartitionValue(&p); err != nil {
		return MirrorPartitionState{}, fmt.Errorf("%w: mirror partition state: %v", ErrCorrupt, err)
	}
	return p, nil
}
