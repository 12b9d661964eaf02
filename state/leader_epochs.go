package state

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
)

// Local leader epochs of mirrored partitions (DESIGN.md decision 3). A
// mirror appends batches carrying the source's leader epochs; the node
// keeps its own epoch per partition above all of them, so clients that
// validate epochs never see it go backwards, even after a truncation
// removes the batches that raised it. One record per topic:
//
//	v1/leader-epoch/<32 lowercase hex topic id>
//	+------+-----------+--------------------------------------+
//	| 0x01 | count u32 | count x (partition i32, epoch i32)   |
//	+------+-----------+--------------------------------------+
//	partitions strictly ascending and >= 0, epochs >= 0.
const keyLeaderEpochPrefix = "v1/leader-epoch/"

func leaderEpochKey(id [16]byte) []byte {
	return []byte(keyLeaderEpochPrefix + hex.EncodeToString(id[:]))
}

// PutLeaderEpoch raises the stored leader epoch of a partition to epoch
// (never lowers it) and returns the stored value, with an fsync.
func (s *Store) PutLeaderEpoch(topicID [16]byte, partition, epoch int32) (int32, error) {
	stored, err := s.PutLeaderEpochs(topicID, map[int32]int32{partition: epoch})
	return stored[partition], err
}

// PutLeaderEpochs is PutLeaderEpoch for several partitions of a topic in
// one write (a failover raises all of a topic's at once); it returns the
// epochs stored, by partition.
func (s *Store) PutLeaderEpochs(topicID [16]byte, raise map[int32]int32) (map[int32]int32, error) {
	for p, e := range raise {
		if p < 0 || e < 0 {
			return nil, fmt.Errorf("state: leader epoch %d of partition %d out of range", e, p)
		}
	}
	stored := map[int32]int32{}
	err := s.update(func(txn tx) error {
		key := leaderEpochKey(topicID)
		epochs := map[int32]int32{}
		if _, err := getRecord(txn, key, func(v []byte) (err error) {
			epochs, err = decodeLeaderEpochs(v)
			return err
		}); err != nil {
			return err
		}
		for p, e := range raise {
			epochs[p] = max(epochs[p], e)
			stored[p] = epochs[p]
		}
		return txn.Set(key, appendLeaderEpochs(nil, epochs))
	})
	return stored, err
}

// LeaderEpochs returns the stored leader epochs of a topic's partitions.
func (s *Store) LeaderEpochs(topicID [16]byte) (map[int32]int32, error) {
	epochs := map[int32]int32{}
	err := s.view(func(txn tx) error {
		_, err := getRecord(txn, leaderEpochKey(topicID), func(v []byte) (err error) {
			epochs, err = decodeLeaderEpochs(v)
			return err
		})
		return err
	})
	return epochs, err
}

// DeleteLeaderEpochs forgets a deleted topic's epochs.
func (s *Store) DeleteLeaderEpochs(topicID [16]byte) error {
	return s.updateFreeing(func(txn tx) error { return txn.Delete(leaderEpochKey(topicID)) })
}

func appendLeaderEpochs(dst []byte, epochs map[int32]int32) []byte {
	parts := make([]int32, 0, len(epochs))
	for p := range epochs {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	dst = binary.BigEndian.AppendUint32(append(dst, formatV1), uint32(len(parts)))
	for _, p := range parts {
		dst = binary.BigEndian.AppendUint32(dst, uint32(p))
		dst = binary.BigEndian.AppendUint32(dst, uint32(epochs[p]))
	}
	return dst
}

func decodeLeaderEpochs(b []byte) (map[int32]int32, error) {
	r := reader{b: b, what: "leader epochs"}
	r.version()
	n := r.u32()
	if r.err == nil && uint64(n)*8 != uint64(len(r.b)) {
		r.fail("%d entries in %d bytes", n, len(r.b))
	}
	epochs := map[int32]int32{}
	prev := int32(-1)
	for i := uint32(0); i < n && r.err == nil; i++ {
		p, e := int32(r.u32()), int32(r.u32())
		if p <= prev || e < 0 {
			r.fail("entry %d: partition %d epoch %d", i, p, e)
		}
		epochs[p], prev = e, p
	}
	if err := r.complete(); err != nil {
		return nil, err
	}
	return epochs, nil
}
