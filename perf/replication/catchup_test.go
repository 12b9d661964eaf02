package main

import (
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"
)

// batch is a v2 RecordBatch header with base offset base, lastOffsetDelta
// delta and body bytes of records after the 61-byte header.
func batch(base int64, delta int32, body int) []byte {
	b := make([]byte, 61+body)
	binary.BigEndian.PutUint64(b[0:8], uint64(base))
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:27], uint32(delta))
	return b
}

func TestBatchesEnd(t *testing.T) {
	t.Parallel()
	two := append(batch(0, 9, 100), batch(10, 4, 50)...)
	short := batch(0, 0, 0) // a length below the header's
	binary.BigEndian.PutUint32(short[8:12], 20)
	for _, tc := range []struct {
		name  string
		in    []byte
		next  int64
		bytes int
		ok    bool
	}{
		{"empty", nil, 0, 0, false},
		{"one", batch(5, 2, 10), 8, 71, true},
		{"two", two, 15, 161 + 111, true},
		{"second cut short", two[:len(two)-1], 10, 161, true},
		{"only a cut batch", batch(0, 3, 10)[:40], 0, 0, false},
		{"length shorter than a header", short, 0, 0, false},
		{"length fields only", batch(0, 0, 0)[:12], 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			next, n, ok := batchesEnd(tc.in)
			if next != tc.next || n != tc.bytes || ok != tc.ok {
				t.Fatalf("batchesEnd = %d, %d, %v; want %d, %d, %v", next, n, ok, tc.next, tc.bytes, tc.ok)
			}
		})
	}
}

func TestSizesBehind(t *testing.T) {
	t.Parallel()
	want := map[int32]int64{0: 100, 1: 200}
	for _, tc := range []struct {
		name string
		have map[int32]int64
		want string
	}{
		{"caught up", map[int32]int64{0: 100, 1: 200}, ""},
		{"nothing yet", nil, "bytes behind: p0 0/100, p1 0/200"},
		{"one short", map[int32]int64{0: 100, 1: 150}, "bytes behind: p1 150/200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := sizesBehind(tc.have, want); got != tc.want {
				t.Fatalf("sizesBehind = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMibPerSec(t *testing.T) {
	t.Parallel()
	if got := mibPerSec(3<<20, 2*time.Second); got != 1.5 {
		t.Errorf("mibPerSec(3 MiB, 2 s) = %v, want 1.5", got)
	}
	if got := mibPerSec(1, 0); got != 0 {
		t.Errorf("mibPerSec(1, 0) = %v, want 0", got)
	}
}

func TestWriteCatchups(t *testing.T) {
	t.Parallel()
	c := func(system string, took, drain time.Duration) catchupResult {
		return catchupResult{system: system, partitions: 2, newReplica: 3, leaders: map[int32]int32{0: 1, 1: 2},
			records: 1000, bytes: 100 << 20, took: took, resolution: 26 * time.Millisecond, polls: 40,
			drain: drainResult{bytes: 100 << 20, took: drain, requests: 12}}
	}
	for _, tc := range []struct {
		name string
		in   []catchupResult
		want []string
	}{
		{"none", nil, nil},
		{"met", []catchupResult{c(systemKmirror, time.Second, 900*time.Millisecond), c(systemKafka, 2*time.Second, time.Second)}, []string{
			"| kmirror | 2 | 3 | p0:1 p1:2 | 1000 | 100.0 |",
			"| 100.0 | 0.900 | 12 | 111.1 | 0.90x |",
			"kmirror catch-up / kmirror drain: 0.90x (goal >= 0.9x: met)",
			"catch-up MB/s kmirror / Kafka: 2.00x",
		}},
		{"missed", []catchupResult{c(systemKmirror, 2*time.Second, time.Second)}, []string{
			"kmirror catch-up / kmirror drain: 0.50x (goal >= 0.9x: missed)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			writeCatchups(&b, tc.in)
			if len(tc.want) == 0 && b.Len() != 0 {
				t.Fatalf("want no output, got %q", b.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("no %q in:\n%s", w, b.String())
				}
			}
		})
	}
}

func TestParseFlagsCatchup(t *testing.T) {
	t.Parallel()
	o, code := parseFlags(nil, io.Discard)
	if code != -1 || o.catchupBytes != 512<<20 {
		t.Fatalf("defaults: code %d, catchupBytes %d", code, o.catchupBytes)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{{[]string{"--catchup-bytes", "0"}, -1}, {[]string{"--catchup-bytes", "-1"}, 2}} {
		if _, code := parseFlags(tc.args, io.Discard); code != tc.code {
			t.Errorf("parseFlags(%q) = %d, want %d", tc.args, code, tc.code)
		}
	}
}
