package mirrorapi

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Decode failures. These are Go errors returned by ReadFrom, not Kafka error
// codes: a broker that gets one closes the connection, as Kafka does with a
// request it cannot parse. Check them with errors.Is.
var (
	// ErrTruncated: the input ended inside a field, or a length or count
	// promises more bytes than remain. It wraps kbin.ErrNotEnoughData, the
	// error kmsg's ReadFrom returns for the same cases.
	ErrTruncated = fmt.Errorf("mirrorapi: truncated message: %w", kbin.ErrNotEnoughData)
	// ErrMalformed: the bytes are complete but do not follow the schema
	// (null in a non-nullable string or array, bytes left after the body or
	// after a known tagged field's value).
	ErrMalformed = errors.New("mirrorapi: malformed message")
	// ErrUnsupportedVersion: ReadFrom was asked to decode a version other
	// than 0, the only version of every mirror RPC.
	ErrUnsupportedVersion = errors.New("mirrorapi: unsupported version")
)

var (
	errNullString = fmt.Errorf("%w: null in a non-nullable string", ErrMalformed)
	errNullArray  = fmt.Errorf("%w: null in a non-nullable array", ErrMalformed)
	errTrailing   = fmt.Errorf("%w: bytes left after the message body", ErrMalformed)
	errTagTail    = fmt.Errorf("%w: bytes left inside a tagged field", ErrMalformed)
)

// Minimum encoded size of each array element, used to reject a count that
// cannot fit in the remaining input before anything is allocated for it
// (the kmsg generated readers do the same). A struct element always ends with
// its tagged-field count, at least one byte.
const (
	minString            = 1                             // compact string: length
	minInt32             = 4                             // int32 element
	minConfig            = 1 + 1 + 1                     // Name, Value, tags
	minStartTopic        = 16 + 1 + 4 + 1                // TopicID, TopicName, NumPartitions, tags
	minRequestTopic      = 1 + 1                         // TopicName, tags
	minResponseTopic     = 1 + 2 + 1 + 1                 // Name, ErrorCode, ErrorMessage, tags
	minListMirror        = 1 + 1 + 1 + 4 + 1 + 1         // MirrorName .. TopicNames, tags
	minLookup            = 16 + 1 + 1                    // TopicID, Partitions, tags
	minDescribeMirror    = 2 + 1 + 4 + 1 + 1             // ErrorCode, MirrorName, AuthorizedOperations, Topics, tags
	minDescribeTopic     = 1 + 1 + 1                     // TopicName, Partitions, tags
	minDescribePartition = 4 + 8 + 8 + 8 + 1 + 2 + 1 + 1 // PartitionIndex .. ErrorMessage, tags
	minLookupResult      = 16 + 1 + 1                    // TopicID, Partitions, tags
	minLookupPartition   = 4 + 4 + 1                     // PartitionIndex, LastMirrorEpoch, tags
	minStopPartition     = 4 + 8 + 8 + 8 + 8 + 1         // PartitionIndex .. Lag, tags
)

// reader is kbin.Reader (sticky truncation flag) plus a sticky structural
// error. Every method returns a zero value once either is set, so decoders
// read straight through and check once, with complete.
type reader struct {
	kbin.Reader
	err error
}

func newReader(src []byte) reader { return reader{Reader: kbin.Reader{Src: src}} }

// fail records err (the first one wins) and stops the reader.
func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.Span(-1) // sets kbin's sticky flag and drops the input
}

func (r *reader) ok() bool { return r.err == nil && r.Ok() }

// complete reports the first failure, or trailing bytes.
func (r *reader) complete() error {
	switch {
	case r.err != nil:
		return r.err
	case !r.Ok():
		return ErrTruncated
	case len(r.Src) != 0:
		return errTrailing
	}
	return nil
}

// str reads a compact (KIP-482) non-nullable string: uvarint length+1, bytes.
func (r *reader) str() string {
	n := r.Uvarint()
	if !r.ok() {
		return ""
	}
	if n == 0 {
		r.fail(errNullString)
		return ""
	}
	// On 32-bit platforms int(n-1) may be negative; Span rejects it.
	return string(r.Span(int(n - 1)))
}

// nullableStr reads a compact nullable string: 0 is null.
func (r *reader) nullableStr() *string {
	n := r.Uvarint()
	if !r.ok() || n == 0 {
		return nil
	}
	s := string(r.Span(int(n - 1)))
	if !r.ok() {
		return nil
	}
	return &s
}

// arrayLen reads a compact non-nullable array count and checks that count
// elements of at least minSize bytes each fit in the remaining input.
//
// REQUIRES: minSize >= 1.
func (r *reader) arrayLen(minSize int) int {
	n := r.Uvarint()
	if !r.ok() {
		return 0
	}
	if n == 0 {
		r.fail(errNullArray)
		return 0
	}
	l := uint64(n - 1)
	if l*uint64(minSize) > uint64(len(r.Src)) {
		r.fail(ErrTruncated)
		return 0
	}
	return int(l)
}

// readArray reads a compact array of structs. An empty array decodes as nil.
func readArray[T any, P interface {
	*T
	readFrom(*reader)
}](r *reader, minSize int) []T {
	l := r.arrayLen(minSize)
	if l == 0 {
		return nil
	}
	out := make([]T, l)
	for i := range out {
		P(&out[i]).readFrom(r)
		if !r.ok() {
			return nil
		}
	}
	return out
}

func (r *reader) strings() []string {
	l := r.arrayLen(minString)
	if l == 0 {
		return nil
	}
	out := make([]string, l)
	for i := range out {
		if out[i] = r.str(); !r.ok() {
			return nil
		}
	}
	return out
}

func (r *reader) int32s() []int32 {
	l := r.arrayLen(minInt32)
	if l == 0 {
		return nil
	}
	out := make([]int32, l)
	for i := range out {
		out[i] = r.Int32()
	}
	return out
}

// tags reads a tagged-field section. known decodes the value of a tag it
// knows from sub (which must then be consumed exactly) and reports true;
// for any other tag it reports false and the value is skipped. Unknown tags
// are not kept: re-encoding drops them (they are "ignorable" by KIP-482).
// known may be nil when a struct has no tagged fields.
func (r *reader) tags(known func(tag uint32, sub *reader) bool) {
	n := r.Uvarint()
	// Each field takes at least two bytes (tag, size), so a forged count
	// fails on the first missing byte; the loop never outruns the input.
	for i := uint32(0); i < n && r.ok(); i++ {
		tag := r.Uvarint()
		size := r.Uvarint()
		val := r.Span(int(size))
		if !r.ok() || known == nil {
			continue
		}
		sub := newReader(val)
		if !known(tag, &sub) {
			continue
		}
		if err := sub.complete(); err != nil {
			if errors.Is(err, errTrailing) {
				err = errTagTail
			}
			r.fail(err)
		}
	}
}

// noTags reads a tagged-field section of a struct without tagged fields.
func (r *reader) noTags() { r.tags(nil) }

// Encoding: every primitive comes from kbin, so the bytes are kmsg's.

func appendStr(dst []byte, s string) []byte          { return kbin.AppendCompactString(dst, s) }
func appendNullableStr(dst []byte, s *string) []byte { return kbin.AppendCompactNullableString(dst, s) }
func appendArrayLen(dst []byte, n int) []byte        { return kbin.AppendCompactArrayLen(dst, n) }
func appendNoTags(dst []byte) []byte                 { return append(dst, 0) }

// appendArray appends a compact array of structs: count, then each element.
func appendArray[T any, P interface {
	*T
	appendTo([]byte) []byte
}](dst []byte, vs []T) []byte {
	dst = appendArrayLen(dst, len(vs))
	for i := range vs {
		dst = P(&vs[i]).appendTo(dst)
	}
	return dst
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = appendArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = appendStr(dst, s)
	}
	return dst
}

func appendInt32s(dst []byte, vs []int32) []byte {
	dst = appendArrayLen(dst, len(vs))
	for _, v := range vs {
		dst = kbin.AppendInt32(dst, v)
	}
	return dst
}

// tagWriter collects a struct's tagged fields. REQUIRES: add is called in
// ascending tag order (KIP-482), and only for fields that are set: a field
// at its default is omitted, not written empty.
type tagWriter struct {
	n   int
	buf []byte
}

func (t *tagWriter) add(tag uint32, val []byte) {
	t.n++
	t.buf = kbin.AppendUvarint(t.buf, tag)
	t.buf = kbin.AppendUvarint(t.buf, uint32(len(val)))
	t.buf = append(t.buf, val...)
}

func (t *tagWriter) appendTo(dst []byte) []byte {
	dst = kbin.AppendUvarint(dst, uint32(t.n))
	return append(dst, t.buf...)
}

// saturate16 narrows an int32 to the int16 the wire carries, clamping values
// out of range instead of wrapping them (a wrapped retry count could turn
// into -1, "non-retryable").
func saturate16(v int32) int16 {
	switch {
	case v > 1<<15-1:
		return 1<<15 - 1
	case v < -1<<15:
		return -1 << 15
	}
	return int16(v)
}

// checkVersion is the first step of every ReadFrom.
func checkVersion(name string, v int16) error {
	if v != 0 {
		return fmt.Errorf("%w: %s v%d (only v0 exists)", ErrUnsupportedVersion, name, v)
	}
	return nil
}
