package state

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeClientQuota: any key suffix and value decodes or fails with
// ErrCorrupt, never panics; what decodes is valid and re-encodes to the
// same key and value (one encoding per record).
func FuzzDecodeClientQuota(f *testing.F) {
	for _, q := range []ClientQuota{
		{Entity: QuotaEntity{User: QuotaName{Set: true, Name: "alice"}, ClientID: QuotaName{Set: true, Default: true}},
			Values: map[string]float64{"producer_byte_rate": 1024, "request_percentage": 50}},
		{Entity: QuotaEntity{IP: QuotaName{Set: true, Name: "10.0.0.1"}}, Values: map[string]float64{"connection_creation_rate": 5}},
	} {
		f.Add(string(quotaKey(q.Entity)[len(keyQuotaPrefix):]), appendClientQuotaValue(nil, q))
	}
	f.Fuzz(func(t *testing.T, suffix string, v []byte) {
		q, err := decodeClientQuota(suffix, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if checkClientQuota(q) != nil {
			t.Fatalf("decoded an invalid quota %+v", q)
		}
		if k := quotaKey(q.Entity)[len(keyQuotaPrefix):]; string(k) != suffix {
			t.Fatalf("key re-encodes to %q, was %q", k, suffix)
		}
		if got := appendClientQuotaValue(nil, q); !bytes.Equal(got, v) {
			t.Fatalf("value re-encodes to % x, was % x", got, v)
		}
	})
}
