package state

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
)

// Keys (see the package doc). These strings are part of the on-disk format.
const (
	keyClusterID          = "v1/meta/cluster-id"
	keyNextProducerID     = "v1/meta/next-producer-id"
	keyTopicPrefix        = "v1/topic/"
	keyTopicIDPrefix      = "v1/topic-id/"
	keyBrokerConfigPrefix = "v1/broker-config/"
	keyNodeConfigPrefix   = "v1/node-config/"
	keyGroupConfigPrefix  = "v1/group-config/"
	keyGroupPrefix        = "v1/group/"
	keyGroupOffsetPrefix  = "v1/group-offset/"
)

// formatV1 is the leading byte of every value written today. Part of the
// on-disk format.
const formatV1 byte = 1

// maxTopicNameLen is Kafka's limit (Topic.MAX_NAME_LENGTH).
const maxTopicNameLen = 249

// maxGroupNameLen bounds group names. Kafka sets no limit of its own, but
// a non-flexible request string carries an int16 length, so no client can
// rely on more; the bound also keeps every group key far below Badger's
// 65000-byte key limit.
const maxGroupNameLen = 1<<15 - 1

func topicKey(name string) []byte { return []byte(keyTopicPrefix + name) }

func topicIDKey(id [16]byte) []byte {
	return hex.AppendEncode([]byte(keyTopicIDPrefix), id[:])
}

// checkTopicName applies Kafka's topic name rules (Topic.validate): 1 to 249
// characters from [a-zA-Z0-9._-], and not "." or "..". A name that Kafka
// would refuse can never be a valid registry entry, and the rule keeps keys
// plain ASCII without separators.
func checkTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty topic name")
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("topic name of %d bytes, limit %d", len(name), maxTopicNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q", name)
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q: illegal character at %d", name, i)
		}
	}
	return nil
}

// checkTopic holds the rules of a valid Topic, shared by PutTopic (refusing
// input) and decodeTopic (refusing stored values), so whatever decodes is
// something PutTopic could have written.
func checkTopic(t *Topic) error {
	if err := checkTopicName(t.Name); err != nil {
		return err
	}
	if t.ID == ([16]byte{}) {
		return fmt.Errorf("topic %q: all-zero topic id", t.Name)
	}
	if t.Partitions < 1 {
		return fmt.Errorf("topic %q: %d partitions", t.Name, t.Partitions)
	}
	for k := range t.Configs {
		if k == "" {
			return fmt.Errorf("topic %q: empty config name", t.Name)
		}
	}
	return nil
}

// appendString appends s as a u32 length and the bytes.
func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// appendTopic appends t's value. REQUIRES: checkTopic(&t) == nil.
func appendTopic(dst []byte, t Topic) []byte {
	dst = append(dst, formatV1)
	dst = append(dst, t.ID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(t.Partitions))
	dst = appendString(dst, t.Name)
	dst = appendString(dst, t.Mirror)
	return appendConfigs(dst, t.Configs)
}

// appendConfigs appends a config map: a u32 count, then (key, value)
// strings in ascending key order. Sorted keys make the encoding canonical
// and let the decoder reject duplicates with one comparison per pair.
func appendConfigs(dst []byte, configs map[string]string) []byte {
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(keys)))
	for _, k := range keys {
		dst = appendString(dst, k)
		dst = appendString(dst, configs[k])
	}
	return dst
}

// decodeTopic decodes a topic value. The returned Configs is never nil.
// Errors wrap ErrCorrupt.
func decodeTopic(b []byte) (Topic, error) {
	r := reader{b: b, what: "topic"}
	r.version()
	var t Topic
	copy(t.ID[:], r.bytes(16))
	t.Partitions = int32(r.u32())
	t.Name = r.str()
	t.Mirror = r.str()
	t.Configs = r.configs()
	if err := r.complete(); err != nil {
		return Topic{}, err
	}
	if err := checkTopic(&t); err != nil {
		return Topic{}, fmt.Errorf("%w: topic: %v", ErrCorrupt, err)
	}
	return t, nil
}

// appendTopicIndex appends the value of a topic-id index entry.
func appendTopicIndex(dst []byte, name string) []byte {
	return appendString(append(dst, formatV1), name)
}

// decodeTopicIndex decodes a topic-id index entry: the topic's name.
func decodeTopicIndex(b []byte) (string, error) {
	r := reader{b: b, what: "topic id index"}
	r.version()
	name := r.str()
	if err := r.complete(); err != nil {
		return "", err
	}
	if err := checkTopicName(name); err != nil {
		return "", fmt.Errorf("%w: topic id index: %v", ErrCorrupt, err)
	}
	return name, nil
}

// appendBrokerConfig appends the value of one dynamic broker config.
func appendBrokerConfig(dst []byte, value string) []byte {
	return appendString(append(dst, formatV1), value)
}

// decodeBrokerConfig decodes one dynamic broker config value. The empty
// string is a legal value.
func decodeBrokerConfig(b []byte) (string, error) {
	r := reader{b: b, what: "broker config"}
	r.version()
	v := r.str()
	if err := r.complete(); err != nil {
		return "", err
	}
	return v, nil
}

// appendClusterID appends the cluster id value.
func appendClusterID(dst []byte, id [16]byte) []byte {
	return append(append(dst, formatV1), id[:]...)
}

// decodeClusterID decodes the cluster id value; an all-zero id is corrupt
// (it is Kafka's "no id").
func decodeClusterID(b []byte) ([16]byte, error) {
	r := reader{b: b, what: "cluster id"}
	r.version()
	var id [16]byte
	copy(id[:], r.bytes(16))
	if err := r.complete(); err != nil {
		return id, err
	}
	if id == ([16]byte{}) {
		return id, fmt.Errorf("%w: cluster id: all zero", ErrCorrupt)
	}
	return id, nil
}

// appendNextProducerID appends the allocator's value: the first id not yet
// handed out.
func appendNextProducerID(dst []byte, next int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, formatV1), uint64(next))
}

// decodeNextProducerID decodes the allocator's value, which lies in
// [firstProducerID, producerIDLimit].
func decodeNextProducerID(b []byte) (int64, error) {
	r := reader{b: b, what: "next producer id"}
	r.version()
	next := int64(r.u64())
	if err := r.complete(); err != nil {
		return 0, err
	}
	if next < firstProducerID || next > producerIDLimit {
		return 0, fmt.Errorf("%w: next producer id %d outside [%d, %d]", ErrCorrupt, next, firstProducerID, producerIDLimit)
	}
	return next, nil
}

// reader decodes one value with a sticky error (kbin style): after the
// first failure every read returns zero values and complete reports the
// failure. Lengths are checked against the bytes left before slicing.
type reader struct {
	b    []byte
	err  error
	what string // record name for error messages
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %s", ErrCorrupt, r.what, fmt.Sprintf(format, args...))
	}
}

// version consumes the format version byte.
func (r *reader) version() {
	if len(r.b) == 0 {
		r.fail("empty value")
		return
	}
	if r.b[0] != formatV1 {
		r.fail("unknown format version %d", r.b[0])
		return
	}
	r.b = r.b[1:]
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.fail("truncated: %d bytes wanted, %d left", n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u32() uint32 {
	if v := r.bytes(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.bytes(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// str reads a u32 length and that many bytes, copied: values handed out by
// Badger die with their transaction.
func (r *reader) str() string {
	n := r.u32()
	if r.err != nil {
		return ""
	}
	if uint64(n) > uint64(len(r.b)) {
		r.fail("string of %d bytes, %d left", n, len(r.b))
		return ""
	}
	return string(r.bytes(int(n)))
}

// configs reads what appendConfigs wrote. A pair takes at least 8 bytes,
// so a count the bytes left cannot hold is refused before it sizes the map.
// The map is never nil.
func (r *reader) configs() map[string]string {
	n := r.count(8)
	configs := make(map[string]string, min(n, 64))
	prev := ""
	for i := uint32(0); i < n && r.err == nil; i++ {
		k, v := r.str(), r.str()
		if r.err != nil {
			break
		}
		if i > 0 && k <= prev {
			r.fail("config %q after %q: keys not strictly ascending", k, prev)
			break
		}
		configs[k] = v
		prev = k
	}
	return configs
}

// prefix consumes the key family prefix p.
func (r *reader) prefix(p string) {
	if v := r.bytes(len(p)); v != nil && string(v) != p {
		r.fail("prefix %q, want %q", v, p)
	}
}

// name reads a key's name field: a minimal uvarint length and that many
// bytes, copied. A longer encoding of the same length would make two keys
// for one name, so it is corruption.
func (r *reader) name() string {
	if r.err != nil {
		return ""
	}
	n, size := binary.Uvarint(r.b)
	if size <= 0 {
		r.fail("bad name length")
		return ""
	}
	var scratch [binary.MaxVarintLen64]byte
	if size != len(binary.AppendUvarint(scratch[:0], n)) {
		r.fail("name length %d in %d bytes, not minimal", n, size)
		return ""
	}
	r.b = r.b[size:]
	if n > uint64(len(r.b)) {
		r.fail("name of %d bytes, %d left", n, len(r.b))
		return ""
	}
	return string(r.bytes(int(n)))
}

// complete reports the sticky error, or corruption if bytes are left over.
func (r *reader) complete() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

// Group keys (see the package doc). A group name is any bytes, so it is
// written as a uvarint length and the bytes: the encodings of two names are
// never a prefix of one another (a uvarint is self-delimiting and the lengths
// differ, or the names do), so the prefix scan of one group never sees a
// group whose name extends it ("a" vs "ab" vs "a\x00b").

// appendGroupName appends the uvarint length of name and name.
func appendGroupName(dst []byte, name string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(name))), name...)
}

// groupKey is the key of a group's GroupMeta.
func groupKey(group string) []byte { return appendGroupKey(nil, group) }

// groupOffsetPrefix is the prefix of every committed offset of group.
func groupOffsetPrefix(group string) []byte {
	return appendGroupName([]byte(keyGroupOffsetPrefix), group)
}

// groupOffsetKey is one partition's committed offset key, as three fields
// for decodeGroupOffsetKey to return and the fuzz target to compare.
type groupOffsetKey struct {
	Group     string
	Topic     string
	Partition int32
}

// appendGroupOffsetKey appends the key of k.
func appendGroupOffsetKey(dst []byte, k groupOffsetKey) []byte {
	dst = append(dst, keyGroupOffsetPrefix...)
	dst = appendGroupName(dst, k.Group)
	dst = appendGroupName(dst, k.Topic)
	return binary.BigEndian.AppendUint32(dst, uint32(k.Partition))
}

// appendGroupKey appends the key of group's meta; the encoder that matches
// decodeGroupKey.
func appendGroupKey(dst []byte, group string) []byte {
	return appendGroupName(append(dst, keyGroupPrefix...), group)
}

// checkGroupName applies the rules of a group name: 1 to maxGroupNameLen
// bytes, any bytes. Kafka refuses the empty group id (INVALID_GROUP_ID).
func checkGroupName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty group name")
	case len(name) > maxGroupNameLen:
		return fmt.Errorf("group name of %d bytes, limit %d", len(name), maxGroupNameLen)
	}
	return nil
}

// decodeGroupKey decodes a group meta key into the group's name. Errors
// wrap ErrCorrupt.
func decodeGroupKey(key []byte) (string, error) {
	r := reader{b: key, what: "group key"}
	r.prefix(keyGroupPrefix)
	g := r.name()
	if err := r.complete(); err != nil {
		return "", err
	}
	if err := checkGroupName(g); err != nil {
		return "", fmt.Errorf("%w: group key: %v", ErrCorrupt, err)
	}
	return g, nil
}

// decodeGroupOffsetKey decodes a committed offset key. Errors wrap
// ErrCorrupt.
func decodeGroupOffsetKey(key []byte) (groupOffsetKey, error) {
	r := reader{b: key, what: "group offset key"}
	r.prefix(keyGroupOffsetPrefix)
	group := r.name()
	if r.err != nil {
		return groupOffsetKey{}, r.err
	}
	if err := checkGroupName(group); err != nil {
		return groupOffsetKey{}, fmt.Errorf("%w: group offset key: %v", ErrCorrupt, err)
	}
	topic, partition, err := decodeTopicPartitionKeyTail(r.b, "group offset key")
	if err != nil {
		return groupOffsetKey{}, err
	}
	return groupOffsetKey{group, topic, partition}, nil
}

// decodeTopicPartitionKeyTail decodes the tail that group-offset and
// mirror-partition keys share: a topic name field and a be32 partition.
// what names the key family in errors, which wrap ErrCorrupt.
func decodeTopicPartitionKeyTail(b []byte, what string) (topic string, partition int32, err error) {
	r := reader{b: b, what: what}
	topic = r.name()
	partition = int32(r.u32())
	if err := r.complete(); err != nil {
		return "", 0, err
	}
	if err := checkTopicName(topic); err != nil {
		return "", 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
	}
	if partition < 0 {
		return "", 0, fmt.Errorf("%w: %s: topic %q partition %d", ErrCorrupt, what, topic, partition)
	}
	return topic, partition, nil
}

// checkGroupOffsetKey holds the rules of an offset's key fields, shared by
// CommitOffsets and the key decoder.
func checkGroupOffsetKey(k groupOffsetKey) error {
	if err := checkGroupName(k.Group); err != nil {
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

// checkGroupOffsetValue holds the rules of an offset's value fields, shared
// by CommitOffsets and decodeGroupOffset.
func checkGroupOffsetValue(o *GroupOffset) error {
	switch {
	case o.Offset < -1:
		return fmt.Errorf("offset %d", o.Offset)
	case o.LeaderEpoch < -1:
		return fmt.Errorf("leader epoch %d", o.LeaderEpoch)
	case o.CommitTimestamp < 0:
		return fmt.Errorf("commit timestamp %d", o.CommitTimestamp)
	}
	return nil
}

// appendGroupOffset appends the value of o: every field but Topic and
// Partition, which the key holds. REQUIRES: checkGroupOffsetValue(&o) == nil.
func appendGroupOffset(dst []byte, o GroupOffset) []byte {
	dst = append(dst, formatV1)
	dst = binary.BigEndian.AppendUint64(dst, uint64(o.Offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(o.LeaderEpoch))
	dst = binary.BigEndian.AppendUint64(dst, uint64(o.CommitTimestamp))
	return appendString(dst, o.Metadata)
}

// decodeGroupOffset decodes an offset value; Topic and Partition are left
// zero (they come from the key). Errors wrap ErrCorrupt.
func decodeGroupOffset(b []byte) (GroupOffset, error) {
	r := reader{b: b, what: "group offset"}
	r.version()
	var o GroupOffset
	o.Offset = int64(r.u64())
	o.LeaderEpoch = int32(r.u32())
	o.CommitTimestamp = int64(r.u64())
	o.Metadata = r.str()
	if err := r.complete(); err != nil {
		return GroupOffset{}, err
	}
	if err := checkGroupOffsetValue(&o); err != nil {
		return GroupOffset{}, fmt.Errorf("%w: group offset: %v", ErrCorrupt, err)
	}
	return o, nil
}

// checkGroupMeta holds the rules of a valid GroupMeta, shared by
// PutGroupMeta and decodeGroupMeta.
func checkGroupMeta(m *GroupMeta) error {
	if err := checkGroupName(m.Group); err != nil {
		return err
	}
	if m.Generation < 0 {
		return fmt.Errorf("group %q: generation %d", m.Group, m.Generation)
	}
	return nil
}

// appendGroupMeta appends the value of m. REQUIRES: checkGroupMeta(&m) == nil.
func appendGroupMeta(dst []byte, m GroupMeta) []byte {
	dst = append(dst, formatV1)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Generation))
	dst = appendString(dst, m.ProtocolType)
	return appendString(dst, m.Group)
}

// decodeGroupMeta decodes a group meta value. Errors wrap ErrCorrupt.
func decodeGroupMeta(b []byte) (GroupMeta, error) {
	r := reader{b: b, what: "group meta"}
	r.version()
	var m GroupMeta
	m.Generation = int32(r.u32())
	m.ProtocolType = r.str()
	m.Group = r.str()
	if err := r.complete(); err != nil {
		return GroupMeta{}, err
	}
	if err := checkGroupMeta(&m); err != nil {
		return GroupMeta{}, fmt.Errorf("%w: group meta: %v", ErrCorrupt, err)
	}
	return m, nil
}
