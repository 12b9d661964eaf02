// Package topicid writes and reads topic ids the way Apache Kafka does, so
// an id kmirror prints can be pasted next to the one kafka-topics.sh
// --describe prints (TopicId: ...) and compared by eye.
//
// Kafka's Uuid.toString is the 16 bytes in URL-safe base64 without
// padding: 22 characters of [A-Za-z0-9_-]. kadm.TopicID's String (standard
// base64 with "==" padding) and hex, which other tools use, are not what a
// Kafka operator sees, so every message of kmirror that names a topic id
// goes through String.
package topicid

import (
	"encoding/base64"
	"fmt"
)

// Len is the length of a formatted id.
const Len = 22

// String formats id as Kafka's Uuid.toString does. The zero id (Kafka's
// ZERO_UUID, "no id") is "AAAAAAAAAAAAAAAAAAAAAA".
func String(id [16]byte) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// Parse reads an id written by String (or by Kafka). Like Kafka's
// Uuid.fromString it also takes the padded form ("==" appended); anything
// else that does not decode to exactly 16 bytes is refused.
func Parse(s string) ([16]byte, error) {
	var id [16]byte
	enc := base64.RawURLEncoding
	switch len(s) {
	case Len:
	case Len + 2:
		enc = base64.URLEncoding
	default:
		return id, fmt.Errorf("topicid: %q: %d characters, want %d", s, len(s), Len)
	}
	b, err := enc.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("topicid: %q is not URL-safe base64 of 16 bytes", s)
	}
	copy(id[:], b)
	return id, nil
}
