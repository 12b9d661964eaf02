package batch

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrRecord marks a record of a batch that does not decode.
var ErrRecord = errors.New("batch: malformed record")

// EachRecord calls fn with the key and value (nil when null) of every
// record of b, an uncompressed data batch: what a coordinator reads back
// from its own topic (kmirror writes those batches uncompressed; a
// compressed one is an error, as is a record that does not decode).
func EachRecord(b Batch, fn func(key, value []byte) error) error {
	if b.Codec() != CodecNone {
		return fmt.Errorf("%w: a %s-compressed batch at offset %d", ErrRecord, b.Codec(), b.BaseOffset())
	}
	recs := b.Records()
	for i := range b.RecordCount() {
		n, w := binary.Varint(recs)
		if w <= 0 || n < 0 || n > int64(len(recs)-w) {
			return fmt.Errorf("%w: record %d of the batch at offset %d: bad length", ErrRecord, i, b.BaseOffset())
		}
		var r kmsg.Record
		if err := r.ReadFrom(recs[:w+int(n)]); err != nil {
			return fmt.Errorf("%w: record %d of the batch at offset %d: %v", ErrRecord, i, b.BaseOffset(), err)
		}
		recs = recs[w+int(n):]
		if err := fn(r.Key, r.Value); err != nil {
			return err
		}
	}
	return nil
}
