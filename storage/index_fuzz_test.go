package storage

import (
	"encoding/binary"
	"testing"
)

// FuzzOffsetIndex: any index file body decodes or is rejected as damaged,
// never panics, and what decodes is ordered and inside the segment.
func FuzzOffsetIndex(f *testing.F) {
	var good []byte
	for i := range 4 {
		good = binary.BigEndian.AppendUint32(good, uint32(i*10))
		good = binary.BigEndian.AppendUint32(good, uint32(i*4096))
	}
	f.Add(good, int64(1<<20))
	f.Add(good[:13], int64(1<<20))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, body []byte, segSize int64) {
		entries, err := decodeOffsetIndex(body, segSize)
		if err != nil {
			return
		}
		if len(entries)*offsetEntrySize != len(body) {
			t.Fatalf("%d entries from %d bytes", len(entries), len(body))
		}
		for i, e := range entries {
			if int64(e.pos) >= segSize || (i > 0 && (e.rel <= entries[i-1].rel || e.pos <= entries[i-1].pos)) {
				t.Fatalf("entry %d accepted out of order or bounds: %+v", i, e)
			}
		}
		// Decoding the two halves of a split at an entry boundary gives the same entries.
		half := len(entries) / 2 * offsetEntrySize
		a, errA := decodeOffsetIndex(body[:half], segSize)
		b, errB := decodeOffsetIndex(body[half:], segSize)
		if errA != nil || errB != nil || len(a)+len(b) != len(entries) {
			t.Fatalf("split decode: %v %v", errA, errB)
		}
	})
}

// FuzzTimeIndex: as FuzzOffsetIndex for the time index.
func FuzzTimeIndex(f *testing.F) {
	var good []byte
	for i := range 3 {
		good = binary.BigEndian.AppendUint64(good, uint64(1000+i))
		good = binary.BigEndian.AppendUint32(good, uint32(i*7))
	}
	f.Add(good, uint32(100))
	f.Add(good[:5], uint32(100))
	f.Fuzz(func(t *testing.T, body []byte, maxRel uint32) {
		entries, err := decodeTimeIndex(body, maxRel)
		if err != nil {
			return
		}
		for i, e := range entries {
			if e.rel > maxRel || (i > 0 && (e.ts <= entries[i-1].ts || e.rel <= entries[i-1].rel)) {
				t.Fatalf("entry %d accepted out of order or bounds: %+v", i, e)
			}
		}
	})
}
