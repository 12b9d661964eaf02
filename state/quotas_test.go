package state

import (
	"errors"
	"testing"
)

// Client quotas round-trip, replace, delete and survive a restart; default
// and named entities of the same type are different records.
func TestClientQuotas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	alice := QuotaEntity{User: QuotaName{Set: true, Name: "alice"}}
	aliceApp := QuotaEntity{User: QuotaName{Set: true, Name: "alice"}, ClientID: QuotaName{Set: true, Default: true}}
	defUser := QuotaEntity{User: QuotaName{Set: true, Default: true}}
	ip := QuotaEntity{IP: QuotaName{Set: true, Name: "10.0.0.1"}}
	if err := s.PutClientQuotas([]ClientQuota{
		{Entity: alice, Values: map[string]float64{"producer_byte_rate": 1024, "consumer_byte_rate": 2048}},
		{Entity: aliceApp, Values: map[string]float64{"request_percentage": 12.5}},
		{Entity: defUser, Values: map[string]float64{"producer_byte_rate": 1 << 20}},
		{Entity: ip, Values: map[string]float64{"connection_creation_rate": 10}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutClientQuotas([]ClientQuota{{Entity: defUser}, {Entity: alice,
		Values: map[string]float64{"producer_byte_rate": 4096}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.ClientQuotas()
	if err != nil {
		t.Fatal(err)
	}
	want := map[QuotaEntity]map[string]float64{
		alice:    {"producer_byte_rate": 4096},
		aliceApp: {"request_percentage": 12.5},
		ip:       {"connection_creation_rate": 10},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entities %+v, want %d", len(got), got, len(want))
	}
	for _, q := range got {
		w, ok := want[q.Entity]
		if !ok || len(w) != len(q.Values) {
			t.Fatalf("unexpected %+v", q)
		}
		for k, v := range w {
			if q.Values[k] != v {
				t.Errorf("%+v %s = %v, want %v", q.Entity, k, q.Values[k], v)
			}
		}
	}
}

// What PutClientQuotas refuses, and damaged records reported as corrupt.
func TestClientQuotasInvalid(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := map[string]float64{"producer_byte_rate": 1}
	for _, tc := range []struct {
		name string
		q    ClientQuota
	}{
		{"empty entity", ClientQuota{Values: v}},
		{"empty name", ClientQuota{Entity: QuotaEntity{User: QuotaName{Set: true}}, Values: v}},
		{"ip with user", ClientQuota{Entity: QuotaEntity{User: QuotaName{Set: true, Default: true},
			IP: QuotaName{Set: true, Default: true}}, Values: v}},
		{"empty key", ClientQuota{Entity: QuotaEntity{User: QuotaName{Set: true, Default: true}},
			Values: map[string]float64{"": 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.PutClientQuotas([]ClientQuota{tc.q}); err == nil {
				t.Fatal("stored")
			}
		})
	}
	key := string(quotaKey(QuotaEntity{User: QuotaName{Set: true, Name: "a"}})[len(keyQuotaPrefix):])
	for _, tc := range []struct {
		name   string
		suffix string
		value  []byte
	}{
		{"no values", key, []byte{formatV1, 0, 0, 0, 0}},
		{"bad tag", "\x03\x00\x00", []byte{formatV1, 0, 0, 0, 0}},
		{"empty entity", "\x00\x00\x00", appendClientQuotaValue(nil, ClientQuota{Values: v})},
		{"truncated", key, []byte{formatV1, 0, 0, 0, 1, 0, 0, 0, 1, 'k'}},
		{"version", key, []byte{2, 0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeClientQuota(tc.suffix, tc.value); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v, want ErrCorrupt", err)
			}
		})
	}
}
