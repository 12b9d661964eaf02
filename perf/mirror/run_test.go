package mirror

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// TestRunTiny runs every mode on a tiny topic from each kind of source the
// package starts itself, and verifies each copy: the mirror's batches
// equal the source's byte for byte, the drain read every batch, the
// pipeline holds the same records at the same offsets.
func TestRunTiny(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{SourceKmirror, SourceKfake} {
		t.Run("source="+kind, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := Run(ctx, Options{
				Partitions: 2, RecordSize: 1024, Bytes: 4 << 20, SourceKind: kind,
				MaxWait: 100 * time.Millisecond, Verify: true, Consumer: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Source.Records != 4096 || res.Source.SegmentBytes <= 0 {
				t.Fatalf("source: %+v", res.Source)
			}
			if r := res.Source.Ratio(); r < 1.5 {
				t.Errorf("lz4 ratio %.2f: LoadValues data should compress about 3x", r)
			}
			if len(res.Modes) != len(AllModes) {
				t.Fatalf("%d mode results, want %d", len(res.Modes), len(AllModes))
			}
			for i, m := range res.Modes {
				if m.Mode != AllModes[i] {
					t.Errorf("result %d is %s, want %s", i, m.Mode, AllModes[i])
				}
				if !m.CaughtUp || !m.Verified {
					t.Errorf("%s: caught up %v, verified %v", m.Mode, m.CaughtUp, m.Verified)
				}
				if m.Bytes != res.Source.SegmentBytes || m.Records != res.Source.Records {
					t.Errorf("%s: moved %d bytes / %d records, the source holds %d / %d",
						m.Mode, m.Bytes, m.Records, res.Source.SegmentBytes, res.Source.Records)
				}
				if m.LagSamples < 1 || m.LagMax <= 0 {
					t.Errorf("%s: %d lag samples, max %d: the first sample is the whole backlog", m.Mode, m.LagSamples, m.LagMax)
				}
				wantConsumer := int64(-1)
				if m.Mode != ModeDrain {
					wantConsumer = res.Source.Records
				}
				if m.ConsumerRecords != wantConsumer {
					t.Errorf("%s: consumer read %d, want %d", m.Mode, m.ConsumerRecords, wantConsumer)
				}
			}
			var sb strings.Builder
			res.WriteTable(&sb)
			for _, want := range []string{"mirror/drain", "mirror/pipeline", "share the process", "verified"} {
				if !strings.Contains(sb.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, sb.String())
				}
			}
		})
	}
}

// TestRunDuration ends a throttled mirror early: the phase stops at the
// duration, partial, with the throttle holding the rate.
func TestRunDuration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, Options{
		Partitions: 2, RecordSize: 1024, Bytes: 8 << 20, Modes: []Mode{ModeMirror},
		Throttle: 1 << 20, Duration: 300 * time.Millisecond, MaxWait: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Modes[0]
	if m.CaughtUp || m.Elapsed < 300*time.Millisecond || m.Bytes >= res.Source.SegmentBytes {
		t.Fatalf("throttled 300ms run: caught up %v after %v, %d of %d bytes", m.CaughtUp, m.Elapsed, m.Bytes, res.Source.SegmentBytes)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mod  func(*Options)
		flag string
	}{
		{"ok", func(*Options) {}, ""},
		{"partitions", func(o *Options) { o.Partitions = -1 }, "--partitions"},
		{"record size", func(o *Options) { o.RecordSize = 2 << 20 }, "--record-size"},
		{"bytes", func(o *Options) { o.Bytes = 100 }, "--bytes"},
		{"codec", func(o *Options) { o.Codec = "brotli" }, "--codec"},
		{"fetchers", func(o *Options) { o.Fetchers = -2 }, "--fetchers"},
		{"fetch max", func(o *Options) { o.FetchMaxBytes = -1 }, "--fetch-max-bytes"},
		{"partition max", func(o *Options) { o.PartitionMaxBytes = -1 }, "--partition-max-bytes"},
		{"max wait", func(o *Options) { o.MaxWait = -time.Second }, "--max-wait"},
		{"throttle", func(o *Options) { o.Throttle = -1 }, "--throttle"},
		{"duration", func(o *Options) { o.Duration = -time.Second }, "--duration"},
		{"source kind", func(o *Options) { o.SourceKind = "redpanda" }, "--source-kind"},
		{"mode", func(o *Options) { o.Modes = []Mode{"copy"} }, "--mode"},
		{"mode twice", func(o *Options) { o.Modes = []Mode{ModeMirror, ModeMirror} }, "--mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var o Options
			tt.mod(&o)
			err := o.WithDefaults().Validate()
			if tt.flag == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.flag+":") {
				t.Fatalf("error %v, want one naming %s", err, tt.flag)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1024", 1024, true},
		{"1GiB", 1 << 30, true},
		{"1gib", 1 << 30, true},
		{"4MiB", 4 << 20, true},
		{"4M", 4 << 20, true},
		{"512k", 512 << 10, true},
		{"1.5GiB", 3 << 29, true},
		{"10MB", 10e6, true},
		{"2GB", 2e9, true},
		{"7B", 7, true},
		{"", 0, false},
		{"GiB", 0, false},
		{"1PiB", 0, false},
		{"-1", 0, false},
		{"abc", 0, false},
		{"99999999999T", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	for _, n := range []int64{1 << 30, 4 << 20, 512 << 10, 1000} {
		if back, err := ParseBytes(FormatBytes(n)); err != nil || back != n {
			t.Errorf("FormatBytes(%d) = %q does not parse back: %d, %v", n, FormatBytes(n), back, err)
		}
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	s := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    int
		want int64
	}{{50, 5}, {99, 10}, {100, 10}, {1, 1}, {0, 1}} {
		if got := percentile(s, tc.p); got != tc.want {
			t.Errorf("p%d = %d, want %d", tc.p, got, tc.want)
		}
	}
	if got := percentile([]int64{42}, 99); got != 42 {
		t.Errorf("p99 of one sample = %d", got)
	}
}

// TestRunExternalSource points Run at a cluster it did not start: it
// creates its own topic there, mirrors it, and deletes it at the end.
func TestRunExternalSource(t *testing.T) {
	t.Parallel()
	c := kfaketest.Source(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, Options{
		Partitions: 3, RecordSize: 512, Bytes: 2 << 20, Source: c.ListenAddrs()[0],
		Modes: []Mode{ModeMirror, ModeDrain}, MaxWait: 100 * time.Millisecond, Verify: true, Fetchers: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Source.Kind != "external" || !strings.HasPrefix(res.Source.Topic, DefaultTopic+"-") {
		t.Fatalf("source %+v", res.Source)
	}
	for _, m := range res.Modes {
		if !m.Verified {
			t.Errorf("%s not verified", m.Mode)
		}
	}
	cl := nodetest.Client(t, c.ListenAddrs())
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(res.Source.Topic) {
		t.Errorf("topic %s left on the external source", res.Source.Topic)
	}
}
