package meta

import (
	"bytes"
	"testing"

	"github.com/kmirror/kmirror/state"
)

// FuzzDecodeEntry: an entry is read from the log and from peers; whatever
// decodes encodes back to the same bytes.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(EncodeEntry([]state.Op{{Key: []byte("v1/topic/t"), Value: []byte{1, 2}}, {Key: []byte("v1/acl/x")}}))
	f.Add(EncodeEntry(nil))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := DecodeEntry(b)
		if err != nil {
			return
		}
		if again := EncodeEntry(ops); !bytes.Equal(again, b) {
			t.Fatalf("decode/encode changed the entry:\n%x\n%x", b, again)
		}
	})
}
