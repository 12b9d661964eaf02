package main

import (
	"io"
	"testing"
)

// Output of Kafka 4.4.0's kafka-producer-perf-test, captured (one 5 s
// window line, then the total).
const producerOut = `Option --producer-props has been deprecated and will be removed in a future version. Use --command-property instead.
SLF4J: Defaulting to no-operation (NOP) logger implementation
65287 records sent, 13052.2 records/sec (6.37 MB/sec), 1773.5 ms avg latency, 2748.0 ms max latency.
100000 records sent, 14808.233378 records/sec (7.23 MB/sec), 2094.85 ms avg latency, 3159.00 ms max latency, 2342 ms 50th, 2988 ms 95th, 3124 ms 99th, 3156 ms 99.9th.
`

// Output of Kafka 4.4.0's kafka-consumer-perf-test, captured.
const consumerOut = `SLF4J: See http://www.slf4j.org/codes.html#StaticLoggerBinder for further details.
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-12-02 07:58:59:008, 2026-12-02 07:59:04:237, 48.8281, 9.3379, 100000, 19124.1155, 4243, 986, 49.5214, 101419.8783
`

func TestParseProducerPerf(t *testing.T) {
	t.Parallel()
	got, err := parseProducerPerf(producerOut)
	if err != nil {
		t.Fatal(err)
	}
	want := producerResult{records: 100000, recordsPerSec: 14808.233378, mbPerSec: 7.23, avgMs: 2094.85, maxMs: 3159,
		p50: 2342, p95: 2988, p99: 3124, p999: 3156}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for name, out := range map[string]string{
		"windows only": "65287 records sent, 13052.2 records/sec (6.37 MB/sec), 1773.5 ms avg latency, 2748.0 ms max latency.\n",
		"empty":        "",
		"garbled":      "100000 records sent, x records/sec (7.23 MB/sec), 2094.85 ms avg latency, 3159.00 ms max latency, 2342 ms 50th, 2988 ms 95th, 3124 ms 99th, 3156 ms 99.9th.\n",
	} {
		if _, err := parseProducerPerf(out); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestParseConsumerPerf(t *testing.T) {
	t.Parallel()
	got, err := parseConsumerPerf(consumerOut)
	if err != nil {
		t.Fatal(err)
	}
	want := consumerResult{mb: 48.8281, mbPerSec: 9.3379, records: 100000, recordsPerSec: 19124.1155,
		rebalanceMs: 4243, fetchMs: 986, fetchMBPerSec: 49.5214, fetchRecordsPerSec: 101419.8783}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, err := parseConsumerPerf("no summary\n"); err == nil {
		t.Error("no summary: want an error")
	}
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"defaults", nil, -1},
		{"help", []string{"-h"}, 0},
		{"unknown system", []string{"--systems", "redpanda"}, 2},
		{"no records", []string{"--records", "0"}, 2},
		{"no runs", []string{"--runs", "0"}, 2},
		{"argument", []string{"x"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, code := parseFlags(tc.args, io.Discard); code != tc.code {
				t.Fatalf("parseFlags(%q) = %d, want %d", tc.args, code, tc.code)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
