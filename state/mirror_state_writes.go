package state

import (
	"bytes"
	"fmt"
)

// In a cluster, a mirror partition's state is written by the node that
// leads the partition, but only the controller appends to the metadata
// log: the leader's store captures the write as ops (capture.go), the
// node sends the states they hold to the controller (mirrorapi's
// WriteMirrorStates, which carries each state's record value as is), and
// the controller writes them with PutMirrorPartitionStates, checked
// against its own records.

// MirrorPartitionStatesOf decodes ops that write mirror partition states
// only (what PutMirrorPartitionState(s) captures) back into the states;
// ok is false when any op is something else (another family, a
// deletion), which no leader may forward.
func MirrorPartitionStatesOf(ops []Op) (states []MirrorPartitionState, ok bool, err error) {
	for _, op := range ops {
		if !bytes.HasPrefix(op.Key, []byte(keyMirrorPartitionPrefix)) || op.Value == nil {
			return nil, false, nil
		}
		k, err := decodeMirrorPartitionKey(op.Key)
		if err != nil {
			return nil, false, err
		}
		p, err := DecodeMirrorPartitionStateRecord(k.Mirror, k.Topic, k.Partition, op.Value)
		if err != nil {
			return nil, false, err
		}
		states = append(states, p)
	}
	return states, len(states) > 0, nil
}

// MirrorPartitionStateRecord is p's record value, as the store writes it;
// an error for a state PutMirrorPartitionState would refuse.
func MirrorPartitionStateRecord(p MirrorPartitionState) ([]byte, error) {
	if p.State != StateFailed {
		p.Previous, p.RetryAttempt = StateUnknown, 0
	}
	p.SourceOffsetTime = toMillis(p.SourceOffsetTime)
	if err := checkMirrorPartitionValue(&p); err != nil {
		return nil, fmt.Errorf("state: mirror %q topic %q partition %d: %v", p.Mirror, p.Topic, p.Partition, err)
	}
	return appendMirrorPartitionState(nil, p), nil
}

// DecodeMirrorPartitionStateRecord decodes a record value (from
// MirrorPartitionStateRecord) as the state of mirror's topic partition.
// Errors wrap ErrCorrupt.
func DecodeMirrorPartitionStateRecord(mirror, topic string, partition int32, v []byte) (MirrorPartitionState, error) {
	if err := checkMirrorPartitionKey(mirrorPartitionKey{mirror, topic, partition}); err != nil {
		return MirrorPartitionState{}, fmt.Errorf("%w: mirror partition state: %v", ErrCorrupt, err)
	}
	p, err := decodeMirrorPartitionState(v)
	if err != nil {
		return MirrorPartitionState{}, err
	}
	p.Mirror, p.Topic, p.Partition = mirror, topic, partition
	return p, nil
}
