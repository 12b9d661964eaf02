package state

import (
	"bytes"
	"testing"
)

// FuzzReadMetadataSnapshot: a snapshot from another node is untrusted
// input; whatever decodes holds only ops checkOp accepts.
func FuzzReadMetadataSnapshot(f *testing.F) {
	s, err := Open("", Options{InMemory: true})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	if err := s.PutTopic(Topic{Name: "t", ID: tid(1), Partitions: 1}); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.WriteMetadataSnapshot(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, ops, err := ReadMetadataSnapshot(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, op := range ops {
			if checkOp(op) != nil {
				t.Fatalf("decoded an op checkOp refuses: %q", op.Key)
			}
		}
	})
}
