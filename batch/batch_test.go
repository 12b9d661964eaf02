package batch

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestViewFields(t *testing.T) {
	t.Parallel()
	raw := testBatch(100, 5, 10, 77)
	binary.BigEndian.PutUint16(raw[offAttributes:], uint16(CodecZstd)|attrTimestampType|attrTransactional|attrDeleteHorizon)
	binary.BigEndian.PutUint32(raw[offCRC:], Checksum(raw[crcStart:]))
	b, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"base offset", b.BaseOffset(), int64(100)},
		{"length", b.Length(), int32(len(raw) - LogOverhead)},
		{"size", b.Size(), len(raw)},
		{"leader epoch", b.PartitionLeaderEpoch(), int32(3)},
		{"magic", b.Magic(), int8(2)},
		{"codec", b.Codec(), CodecZstd},
		{"log append time", b.LogAppendTime(), true},
		{"transactional", b.IsTransactional(), true},
		{"control", b.IsControl(), false},
		{"delete horizon", b.HasDeleteHorizon(), true},
		{"last offset delta", b.LastOffsetDelta(), int32(4)},
		{"base timestamp", b.BaseTimestamp(), int64(1_700_000_000_000)},
		{"max timestamp", b.MaxTimestamp(), int64(1_700_000_000_004)},
		{"producer id", b.ProducerID(), int64(77)},
		{"has producer id", b.HasProducerID(), true},
		{"producer epoch", b.ProducerEpoch(), int16(2)},
		{"base sequence", b.BaseSequence(), int32(10)},
		{"record count", b.RecordCount(), int32(5)},
		{"last offset", b.LastOffset(), int64(104)},
		{"next offset", b.NextOffset(), int64(105)},
		{"records length", len(b.Records()), len(raw) - HeaderSize},
		{"crc", b.CRC(), Checksum(raw[crcStart:])},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if !strings.Contains(CodecLz4.String(), "lz4") || !strings.Contains(Codec(7).String(), "7") {
		t.Errorf("codec names: %v %v", CodecLz4, Codec(7))
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	good := testBatch(9, 2, 4, -1)
	withLength := func(n int32) []byte {
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint32(b[offLength:], uint32(n))
		return b
	}
	withMagic := func(m byte) []byte {
		b := append([]byte(nil), good...)
		b[offMagic] = m
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"header only part", good[:30], ErrShort},
		{"cut records", good[:len(good)-1], ErrShort},
		{"trailing bytes", append(append([]byte(nil), good...), 0), ErrCorrupt},
		{"negative length", withLength(-5), ErrCorrupt},
		{"length below header", withLength(MinLength - 1), ErrCorrupt},
		{"magic 0", withMagic(0), ErrLegacyMagic},
		{"magic 1", withMagic(1), ErrLegacyMagic},
		{"magic 3", withMagic(3), ErrUnknownMagic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse: got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyNamesOffset(t *testing.T) {
	t.Parallel()
	raw := testBatch(4242, 3, 8, -1)
	raw[len(raw)-1] ^= 0x01
	b, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Verify()
	var be *Error
	if !errors.As(err, &be) || be.Offset != 4242 || !errors.Is(err, ErrCorrupt) || !IsCorruption(err) {
		t.Fatalf("Verify: %v", err)
	}
	if !strings.Contains(err.Error(), "offset 4242") {
		t.Fatalf("message does not name the offset: %q", err)
	}
	if IsCorruption(&Error{Err: ErrLegacyMagic}) {
		t.Fatal("a legacy message set is not corruption")
	}
}

// Bit flips anywhere in the CRC range must be caught.
func TestVerifyCatchesEveryBitFlip(t *testing.T) {
	t.Parallel()
	raw := testBatch(0, 3, 5, 1)
	for i := crcStart; i < len(raw); i++ {
		for bit := range 8 {
			raw[i] ^= 1 << bit
			if Batch(raw).Verify() == nil {
				t.Fatalf("flip of bit %d at byte %d not detected", bit, i)
			}
			raw[i] ^= 1 << bit
		}
	}
}
