package meta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/state"
)

// An entry of the metadata log is one atomic change to the replicated
// records of state/: the keys and encoded values state/ writes, so every
// node's store applies exactly the bytes the controller wrote. Layout
// (part of the cluster's protocol, version 1):
//
//	version      byte (1)
//	count        uvarint
//	count times: key length uvarint, key,
//	             kind byte (0 delete, 1 set), then for a set
//	             value length uvarint, value
const entryVersion = 1

// maxEntryOps bounds the ops of one entry a decoder accepts, so a damaged
// count cannot make it allocate without bound.
const maxEntryOps = 1 << 20

// ErrBadEntry is the error of an entry that does not decode.
var ErrBadEntry = errors.New("meta: malformed metadata log entry")

// EncodeEntry encodes ops as one metadata log entry.
func EncodeEntry(ops []state.Op) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, op := range ops {
		n += 2*binary.MaxVarintLen64 + 1 + len(op.Key) + len(op.Value)
	}
	b := make([]byte, 0, n)
	b = append(b, entryVersion)
	b = binary.AppendUvarint(b, uint64(len(ops)))
	for _, op := range ops {
		b = binary.AppendUvarint(b, uint64(len(op.Key)))
		b = append(b, op.Key...)
		if op.Value == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(op.Value)))
		b = append(b, op.Value...)
	}
	return b
}

// DecodeEntry decodes an entry written by EncodeEntry. The ops alias b.
func DecodeEntry(b []byte) ([]state.Op, error) {
	if len(b) == 0 || b[0] != entryVersion {
		return nil, fmt.Errorf("%w: unknown version", ErrBadEntry)
	}
	b = b[1:]
	uvarint := func() (uint64, error) {
		v, w := binary.Uvarint(b)
		switch {
		case w <= 0:
			return 0, fmt.Errorf("%w: truncated", ErrBadEntry)
		case w > 1 && b[w-1] == 0: // one encoding per number
			return 0, fmt.Errorf("%w: a length of more bytes than it needs", ErrBadEntry)
		}
		b = b[w:]
		return v, nil
	}
	bytesOf := func() ([]byte, error) {
		n, err := uvarint()
		if err != nil {
			return nil, err
		}
		if n > uint64(len(b)) {
			return nil, fmt.Errorf("%w: a field of %d bytes, %d left", ErrBadEntry, n, len(b))
		}
		f := b[:n:n]
		b = b[n:]
		return f, nil
	}
	count, err := uvarint()
	if err != nil {
		return nil, err
	}
	if count > maxEntryOps || count > uint64(len(b)) { // an op takes at least 2 bytes
		return nil, fmt.Errorf("%w: %d ops", ErrBadEntry, count)
	}
	ops := make([]state.Op, 0, count)
	for range count {
		key, err := bytesOf()
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("%w: truncated", ErrBadEntry)
		}
		kind := b[0]
		b = b[1:]
		op := state.Op{Key: key}
		switch kind {
		case 0:
		case 1:
			if op.Value, err = bytesOf(); err != nil {
				return nil, err
			}
			if op.Value == nil {
				op.Value = []byte{}
			}
		default:
			return nil, fmt.Errorf("%w: op kind %d", ErrBadEntry, kind)
		}
		ops = append(ops, op)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last op", ErrBadEntry, len(b))
	}
	return ops, nil
}
