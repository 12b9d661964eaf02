package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// TestProduceReadBack runs the benchmark's core briefly against an
// in-process kmirror node and kfake (no JVM): a few MB per codec, then
// reads every partition back and checks that the brokers stored exactly
// the batches acknowledged, byte for byte in count and size.
func TestProduceReadBack(t *testing.T) {
	t.Parallel()
	targets := []struct {
		name  string
		start func(t *testing.T) string
	}{
		{targetKmirror, startKmirrorInProcess},
		{targetKfake, func(t *testing.T) string {
			return kfaketest.Source(t).ListenAddrs()[0]
		}},
	}
	codecs := []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLz4, batch.CodecZstd}
	for _, tg := range targets {
		t.Run("target="+tg.name, func(t *testing.T) {
			t.Parallel()
			addr := tg.start(t)
			cl, err := adminClient(addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			for i, codec := range codecs {
				t.Run("codec="+codec.String(), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					p, err := newPayload(codec, 16<<10, time.Now())
					if err != nil {
						t.Fatal(err)
					}
					if err := batch.Batch(p.batch).Verify(); err != nil {
						t.Fatalf("the rewritten batch: %v", err)
					}
					acks := []int16{-1, 1}[i%2]
					l := load{topic: "t-" + codec.String(), partitions: 2, acks: acks, conns: 2, inFlight: 3,
						duration: 5 * time.Second, maxBytes: 2 << 20}
					if err := createTopic(ctx, cl, l.topic, l.partitions); err != nil {
						t.Fatal(err)
					}
					res, err := produce(ctx, addr, 0, nil, p, l)
					if err != nil {
						t.Fatal(err)
					}
					if res.wire == 0 || res.records == 0 || res.plain < res.wire || res.elapsed <= 0 {
						t.Fatalf("window counted wire=%d plain=%d records=%d in %v", res.wire, res.plain, res.records, res.elapsed)
					}
					if res.totalWire < res.wire {
						t.Fatalf("total %d bytes < window %d", res.totalWire, res.wire)
					}
					got, err := readBack(ctx, cl, l.topic, l.partitions)
					if err != nil {
						t.Fatal(err)
					}
					if got.bytes != res.totalWire || got.records != res.totalRecords || got.end != res.totalRecords {
						t.Fatalf("read back %d bytes, %d records, end offsets %d; acknowledged %d bytes, %d records",
							got.bytes, got.records, got.end, res.totalWire, res.totalRecords)
					}
					if err := deleteTopic(ctx, cl, l.topic); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}

// startKmirrorInProcess starts a kmirror node on 127.0.0.1:0 in a test
// directory and returns its address.
func startKmirrorInProcess(t *testing.T) string {
	return nodetest.Start(t, nodetest.Config(t)).Addr()
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"defaults", nil, -1},
		{"one cell", []string{"--codecs", "zstd", "--targets", "kmirror,kfake", "--acks", "1", "--batch-size", "16KiB,1MiB"}, -1},
		{"unknown codec", []string{"--codecs", "brotli"}, 2},
		{"unknown target", []string{"--targets", "redpanda"}, 2},
		{"acks 0", []string{"--acks", "0"}, 2},
		{"batch too big", []string{"--batch-size", "2MiB"}, 2},
		{"help", []string{"--help"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, code := parseFlags(tt.args, io.Discard); code != tt.code {
				t.Fatalf("parseFlags(%q) = %d, want %d", tt.args, code, tt.code)
			}
		})
	}
}
