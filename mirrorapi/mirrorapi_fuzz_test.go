package mirrorapi

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzReadFrom decodes arbitrary bytes as every request and response type
// (the first byte picks the type). Invariants:
//   - ReadFrom never panics, on the input, on its halves (the nats split
//     trick) or on any prefix;
//   - a decoded value re-encodes to at most the input's length, and that
//     encoding decodes to an equal value (nil and empty slices equal) and
//     re-encodes to the same bytes;
//   - the encoding is prefix-free: if the input decodes, neither half-cut
//     prefix nor any strict prefix of the re-encoding does.
func FuzzReadFrom(f *testing.F) {
	protos := fullMessages()
	for i, m := range protos {
		full := m.AppendTo(nil)
		f.Add(append([]byte{byte(i)}, full...))
		f.Add(append([]byte{byte(i)}, fresh(m).AppendTo(nil)...))
		f.Add(append([]byte{byte(i)}, withTags(fresh(m).AppendTo(nil), tagField(0, []byte{1}), tagField(1, []byte{2, 0x02, 'a'}), tagField(200, []byte("zz")))...))
		f.Add(append([]byte{byte(i)}, full[:len(full)/2]...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		proto := protos[int(data[0])%len(protos)]
		in := data[1:]

		half := len(in) / 2
		errFirst := fresh(proto).ReadFrom(in[:half])
		_ = fresh(proto).ReadFrom(in[half:])

		v := fresh(proto)
		if err := v.ReadFrom(in); err != nil {
			return
		}
		if half < len(in) && errFirst == nil {
			t.Fatalf("%s: both %x and its prefix %x decode", typeName(proto), in, in[:half])
		}

		b := v.AppendTo(nil)
		if len(b) > len(in) {
			t.Fatalf("%s: re-encoding %d bytes is longer than the %d bytes read", typeName(proto), len(b), len(in))
		}
		w := fresh(proto)
		if err := w.ReadFrom(b); err != nil {
			t.Fatalf("%s: re-encoding does not decode: %v\n in %x\nout %x", typeName(proto), err, in, b)
		}
		if !reflect.DeepEqual(normalized(w), normalized(v)) {
			t.Fatalf("%s: round trip differs\n got %#v\nwant %#v", typeName(proto), w, v)
		}
		if b2 := w.AppendTo(nil); !bytes.Equal(b2, b) {
			t.Fatalf("%s: encoding not stable\n got %x\nwant %x", typeName(proto), b2, b)
		}
		if len(b) <= 1<<12 {
			for i := range b {
				if fresh(proto).ReadFrom(b[:i]) == nil {
					t.Fatalf("%s: prefix %d of %d decodes: %x", typeName(proto), i, len(b), b)
				}
			}
		}
	})
}
