package topicid

import (
	"testing"
	"testing/quick"
)

// The expected strings are what Kafka's Uuid.toString prints for these ids:
// URL-safe base64 without padding over the 16 wire bytes (the most, then
// the least significant long, big endian), checked against Python's
// base64.urlsafe_b64encode with the "==" dropped.
func TestStringLikeKafka(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id   [16]byte
		want string
	}{
		{[16]byte{}, "AAAAAAAAAAAAAAAAAAAAAA"},
		{[16]byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10},
			"AQIDBAUGBwgJCgsMDQ4PEA"},
		// 0xfb 0xff: the two characters where URL-safe and standard
		// base64 differ ('-' and '_' for '+' and '/').
		{[16]byte{0xfb, 0xef, 0xbe, 0xff, 0xff, 0xff, 0xfb, 0xef, 0xbe, 0xff, 0xff, 0xff, 0xfb, 0xef, 0xbe, 0xff},
			"----____----____----_w"},
	} {
		got := String(tc.id)
		if got != tc.want {
			t.Errorf("String(%x) = %q, want %q", tc.id, got, tc.want)
		}
		if len(got) != Len {
			t.Errorf("String(%x) has %d characters, want %d", tc.id, len(got), Len)
		}
		if back, err := Parse(got); err != nil || back != tc.id {
			t.Errorf("Parse(%q) = %x, %v", got, back, err)
		}
		if back, err := Parse(got + "=="); err != nil || back != tc.id {
			t.Errorf("Parse(%q) = %x, %v", got+"==", back, err)
		}
	}
}

func TestParseRoundTrip(t *testing.T) {
	t.Parallel()
	if err := quick.Check(func(id [16]byte) bool {
		back, err := Parse(String(id))
		return err == nil && back == id
	}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"",
		"AQIDBAUGBwgJCgsMDQ4PE",            // 21 characters
		"AQIDBAUGBwgJCgsMDQ4PEAA",          // 23
		"AQIDBAUGBwgJCgsMDQ4PEA=",          // one pad character
		"AQIDBAUGBwgJCgsMDQ4PEAAA",         // 24 without padding: 18 bytes
		"AQIDBAUGBwgJCgsMDQ4P+A",           // standard alphabet
		"AQIDBAUGBwgJCgsMDQ4P/A",           // standard alphabet
		"AQIDBAUGBwgJCgsMDQ4PE!",           // not base64
		"0102030405060708090a0b0c0d0e0f10", // hex
	} {
		if id, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %x, want an error", s, id)
		}
	}
}
