package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// Mirror keys (see the package doc). These strings are part of the on-disk
// format.
const (
	keyMirrorPrefix          = "v1/mirror/"
	keyMirrorPartitionPrefix = "v1/mirror-partition/"
)

// maxMirrorNameLen is the limit of a cluster mirror name (SPEC.md section
// 1), the same as a topic name's.
const maxMirrorNameLen = 249

// Mirror is a cluster mirror: its configs, the source cluster id captured
// at create, and the desired state of each of its topics.
type Mirror struct {
	Name string
	// SourceClusterID is the source's cluster id as the source reported it
	// at create (mirror.source.cluster.id); "" if unknown.
	SourceClusterID string
	// Configs holds the mirror-level configs under their SPEC.md section 3
	// names (bootstrap.servers, mirror.fetch.max.bytes, ...), stored as
	// given: only explicitly set keys, never defaults. Secrets
	// (sasl.jaas.config, ssl.*.password) are sealed on disk and opened
	// when read (secrets.go): a Mirror in memory holds them in the clear.
	// Mirrors read from the store always have a non-nil map.
	Configs map[string]string
	// Include holds the topics.include patterns (regular expressions that
	// must match a whole topic name), in the order they were added;
	// Exclude the topics.exclude patterns. Neither holds an empty pattern.
	// The store does not compile them. Nil when there are none.
	Include []string
	Exclude []string
	// Topics maps each topic of the mirror to its desired state:
	// StateMirroring, StatePaused or StateStopped. Mirrors read from the
	// store always have a non-nil map.
	Topics map[string]PartitionState
}

// PutMirror inserts m, or replaces the mirror of the same name, fsynced.
// Replacing a mirror leaves its partition states alone: the caller drops
// those of a topic that left the mirror with DeleteMirrorPartitionStates.
//
// It refuses an invalid mirror: a name that is not 1 to 249 characters of
// [A-Za-z0-9._-] or is "." or "..", an empty config name, an empty
// pattern, a topic name Kafka would refuse, or a desired state other than
// StateMirroring, StatePaused and StateStopped.
func (s *Store) PutMirror(m Mirror) error {
	if err := checkMirror(&m); err != nil {
		return fmt.Errorf("state: put mirror: %v", err)
	}
	sealed, err := s.sealConfigs(m.Name, m.Configs)
	if err != nil {
		return err
	}
	m.Configs = sealed
	key, val := mirrorKey(m.Name), appendMirror(nil, m)
	return s.update(func(txn tx) error { return txn.Set(key, val) })
}

// GetMirror returns the mirror named name, or an error wrapping
// ErrNotFound (also for a name no mirror can have).
func (s *Store) GetMirror(name string) (Mirror, error) {
	var m Mirror
	err := s.view(func(txn tx) error {
		found := false
		if checkMirrorName(name) == nil {
			var err error
			found, err = getRecord(txn, mirrorKey(name), func(v []byte) error {
				var err error
				m, err = decodeMirrorFor(name, v)
				return err
			})
			if err != nil {
				return err
			}
		}
		if !found {
			return fmt.Errorf("%w: mirror %q", ErrNotFound, name)
		}
		return nil
	})
	if err != nil {
		return Mirror{}, err
	}
	if err := s.openConfigs(m.Name, m.Configs); err != nil {
		return Mirror{}, err
	}
	return m, nil
}

// Mirrors returns every mirror, sorted by name.
func (s *Store) Mirrors() ([]Mirror, error) {
	var ms []Mirror
	err := s.view(func(txn tx) error {
		ms = ms[:0]
		// Names are the whole key suffix, so key order is name order.
		return scanPrefix(txn, keyMirrorPrefix, func(name string, v []byte) error {
			m, err := decodeMirrorFor(name, v)
			if err == nil {
				err = s.openConfigs(m.Name, m.Configs)
			}
			if err != nil {
				return err
			}
			ms = append(ms, m)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// DeleteMirror deletes the mirror named name and all its partition states,
// fsynced, or returns an error wrapping ErrNotFound. Values are not read,
// so a corrupt mirror or partition state is deleted too: this is the
// repair path for a mirror.
//
// The deletion is one transaction unless the mirror has more partition
// states than one holds (several thousand). Then the partition states go
// first, in several, and the mirror with the last of them: a failure or a
// crash in between leaves the mirror with some of its states, and calling
// DeleteMirror again finishes the work. The mirror record goes last so
// that no partition state ever outlives its mirror (PutMirrorPartitionState
// refuses a state of an unknown mirror).
func (s *Store) DeleteMirror(name string) error {
	if checkMirrorName(name) != nil {
		// No such mirror can exist, and a name with a '/' would make a
		// prefix that reaches into another mirror's partition states.
		return fmt.Errorf("%w: mirror %q", ErrNotFound, name)
	}
	key := mirrorKey(name)
	prefix := mirrorPartitionPrefix(name)
	for {
		var more bool
		err := s.update(func(txn tx) error {
			if err := mirrorExists(txn, name); err != nil {
				return err
			}
			kb := s.newKeyBatch(1) // room for the mirror key
			var err error
			if more, err = collectKeys(txn, prefix, &kb); err != nil {
				return err
			}
			if err := kb.deleteAll(txn); err != nil {
				return err
			}
			if more {
				return nil
			}
			return txn.Delete(key)
		})
		if err != nil || !more {
			return err
		}
	}
}

// mirrorExists returns nil if mirror name has a record in txn (which it
// does not decode), else an error wrapping ErrNotFound.
func mirrorExists(txn tx, name string) error {
	key := mirrorKey(name)
	_, err := txn.Get(key)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return fmt.Errorf("%w: mirror %q", ErrNotFound, name)
	case err != nil:
		return fmt.Errorf("state: reading key %q: %w", key, err)
	}
	return nil
}

func mirrorKey(name string) []byte { return []byte(keyMirrorPrefix + name) }

// decodeMirrorFor decodes the value stored under the key of mirror name and
// checks that it describes that mirror.
func decodeMirrorFor(name string, v []byte) (Mirror, error) {
	m, err := decodeMirror(v)
	if err != nil {
		return Mirror{}, err
	}
	if m.Name != name {
		return Mirror{}, fmt.Errorf("%w: mirror: value names mirror %q", ErrCorrupt, m.Name)
	}
	return m, nil
}

// checkMirrorName applies the rules of a cluster mirror name (SPEC.md
// section 1), which are Kafka's topic name rules: 1 to 249 characters from
// [a-zA-Z0-9._-], and not "." or "..". Keys rely on it: a mirror name
// holds no '/', which ends the name field of a partition state key.
func checkMirrorName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty mirror name")
	case len(name) > maxMirrorNameLen:
		return fmt.Errorf("mirror name of %d bytes, limit %d", len(name), maxMirrorNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("mirror name %q", name)
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("mirror name %q: illegal character at %d", name, i)
		}
	}
	return nil
}

// isDesiredState reports whether st may be a topic's desired state.
func isDesiredState(st PartitionState) bool {
	return st == StateMirroring || st == StatePaused || st == StateStopped
}

// checkMirror holds the rules of a valid Mirror, shared by PutMirror
// (refusing input) and decodeMirror (refusing stored values), so whatever
// decodes is something PutMirror could have written.
func checkMirror(m *Mirror) error {
	if err := checkMirrorName(m.Name); err != nil {
		return err
	}
	for k := range m.Configs {
		if k == "" {
			return fmt.Errorf("mirror %q: empty config name", m.Name)
		}
	}
	for _, p := range m.Include {
		if p == "" {
			return fmt.Errorf("mirror %q: empty include pattern", m.Name)
		}
	}
	for _, p := range m.Exclude {
		if p == "" {
			return fmt.Errorf("mirror %q: empty exclude pattern", m.Name)
		}
	}
	for topic, st := range m.Topics {
		if err := checkTopicName(topic); err != nil {
			return fmt.Errorf("mirror %q: %v", m.Name, err)
		}
		if !isDesiredState(st) {
			return fmt.Errorf("mirror %q: topic %q: desired state %v", m.Name, topic, st)
		}
	}
	return nil
}

// appendMirror appends m's value. REQUIRES: checkMirror(&m) == nil.
func appendMirror(dst []byte, m Mirror) []byte {
	dst = append(dst, formatV1)
	dst = appendString(dst, m.Name)
	dst = appendString(dst, m.SourceClusterID)
	dst = appendConfigs(dst, m.Configs)
	for _, patterns := range [][]string{m.Include, m.Exclude} {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(patterns)))
		for _, p := range patterns {
			dst = appendString(dst, p)
		}
	}
	topics := make([]string, 0, len(m.Topics))
	for t := range m.Topics {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(topics)))
	for _, t := range topics {
		dst = appendString(dst, t)
		dst = append(dst, byte(m.Topics[t]))
	}
	return dst
}

// decodeMirror decodes a mirror value. The returned Configs and Topics are
// never nil; Include and Exclude are nil when empty. Errors wrap
// ErrCorrupt.
func decodeMirror(b []byte) (Mirror, error) {
	r := reader{b: b, what: "mirror"}
	r.version()
	var m Mirror
	m.Name = r.str()
	m.SourceClusterID = r.str()

	// Every count is checked against the bytes left before it sizes
	// anything: a config pair takes at least 8 bytes, a pattern 5 (it is
	// not empty) and a topic entry 6 (a name of 1 byte and a state).
	m.Configs = r.configs()
	m.Include = r.patterns()
	m.Exclude = r.patterns()

	n := r.count(6)
	m.Topics = make(map[string]PartitionState, min(n, 64))
	prev := ""
	for i := uint32(0); i < n && r.err == nil; i++ {
		t, st := r.str(), PartitionState(r.i8())
		if r.err != nil {
			break
		}
		if i > 0 && t <= prev {
			r.fail("topic %q after %q: topics not strictly ascending", t, prev)
			break
		}
		m.Topics[t] = st
		prev = t
	}
	if err := r.complete(); err != nil {
		return Mirror{}, err
	}
	if err := checkMirror(&m); err != nil {
		return Mirror{}, fmt.Errorf("%w: mirror: %v", ErrCorrupt, err)
	}
	return m, nil
}

// count reads a u32 element count and refuses one the bytes left cannot
// hold at minSize bytes per element.
func (r *reader) count(minSize uint64) uint32 {
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(r.b))/minSize {
		r.fail("%d entries in %d bytes", n, len(r.b))
		return 0
	}
	return n
}

// patterns reads a pattern list: a count and that many strings. Nil when
// the count is 0.
func (r *reader) patterns() []string {
	n := r.count(5)
	if n == 0 {
		return nil
	}
	ps := make([]string, 0, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		ps = append(ps, r.str())
	}
	return ps
}

// i8 reads one signed byte.
func (r *reader) i8() int8 {
	if v := r.bytes(1); v != nil {
		return int8(v[0])
	}
	return 0
}
