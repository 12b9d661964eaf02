package storage

import "testing"

// FuzzPartitionMetadata: any partition.metadata body parses or is refused,
// never panics; what parses is a non-zero id that writes back as Kafka
// does and parses again to itself.
func FuzzPartitionMetadata(f *testing.F) {
	// Kafka's layout (PartitionMetadataFile), then variants around it.
	f.Add([]byte("version: 0\ntopic_id: yVq3nrJ6Sx2y9Q5IF0Ht5A\n"))
	f.Add([]byte("version: 0\r\ntopic_id: yVq3nrJ6Sx2y9Q5IF0Ht5A\r\n"))
	f.Add([]byte("version: 1\ntopic_id: yVq3nrJ6Sx2y9Q5IF0Ht5A\n"))
	f.Add([]byte("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"))
	f.Add([]byte("version: 0\ntopic_id: yVq3nrJ6Sx2y9Q5IF0Ht5A==\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, body []byte) {
		id, err := ParsePartitionMetadata(body)
		if err != nil {
			return
		}
		if id == ([16]byte{}) {
			t.Fatalf("%q: the zero id accepted", body)
		}
		again, err := ParsePartitionMetadata(AppendPartitionMetadata(nil, id))
		if err != nil || again != id {
			t.Fatalf("%q: the id does not write back: %v", body, err)
		}
		// A torn write leaves a prefix: it is refused, or (padding cut
		// off) names the same id, never another one.
		half := body[:len(body)/2]
		if hid, err := ParsePartitionMetadata(half); err == nil && hid != id {
			t.Fatalf("%q parses as %x, its half %q as %x", body, id, half, hid)
		}
	})
}
