package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kcat drives the broker with librdkafka, a client written independently of
// franz-go: its ApiVersions negotiation, Metadata parsing, batch encoding
// and fetch decoding are what these tests exercise.

// kcatTimeout bounds one kcat run; a hung librdkafka fails the test.
const kcatTimeout = 20 * time.Second

// kcatPath finds kcat. Without it the tests skip on a developer machine and
// fail under CI, which must never skip them silently.
func kcatPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("kcat not installed; .ci/run installs it (apt-get install kcat): %v", err)
		}
		t.Skip("kcat not installed; .ci/run installs it (apt-get install kcat); skipping outside CI")
	}
	return p
}

// runKcat runs kcat against addr with stdin and returns its stdout; any
// failure reports kcat's stderr.
func runKcat(t *testing.T, addr, stdin string, args ...string) string {
	t.Helper()
	stdout, stderr, err := kcatRun(t, addr, stdin, args...)
	if err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s\nstdout:\n%s", strings.Join(args, " "), err, stderr, stdout)
	}
	return stdout
}

// kcatRun runs kcat against addr with stdin, within kcatTimeout, and
// returns what it wrote and how it exited (a timeout says so).
func kcatRun(t *testing.T, addr, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	path := kcatPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), kcatTimeout)
	defer cancel()
	// IPv4 only: the broker listens on 127.0.0.1, and librdkafka would
	// otherwise also try ::1 for names that resolve to both.
	args = append([]string{"-b", addr, "-X", "broker.address.family=v4"}, args...)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = time.Second
	if err = cmd.Run(); err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (after kcatTimeout %v: %v)", err, kcatTimeout, ctx.Err())
	}
	return out.String(), errOut.String(), err
}

// kcatMetadata is kcat -L -J's JSON.
type kcatMetadata struct {
	OriginatingBroker kcatBroker   `json:"originating_broker"`
	ControllerID      int32        `json:"controllerid"`
	Brokers           []kcatBroker `json:"brokers"`
	Topics            []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32        `json:"partition"`
			Leader    int32        `json:"leader"`
			Error     string       `json:"error"`
			Replicas  []kcatBroker `json:"replicas"`
			ISRs      []kcatBroker `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

type kcatBroker struct {
	ID   int32  `json:"id"`
	Name string `json:"name"`
}

func TestKcatMetadata(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	n := startNode(t)
	ctx := testCtx(t, 30*time.Second)
	adm := newAdmin(t, n.addr())
	topics := map[string]int32{"kcat-meta-four": 4, "kcat-meta-one": 1}
	for name, parts := range topics {
		createTopic(t, ctx, adm, name, parts, nil)
	}
	cases := []struct {
		name string
		args []string
		want []string // topics listed
	}{
		{"all topics", nil, []string{"kcat-meta-four", "kcat-meta-one"}},
		{"one topic", []string{"-t", "kcat-meta-four"}, []string{"kcat-meta-four"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := runKcat(t, n.addr(), "", append([]string{"-L", "-J"}, c.args...)...)
			var md kcatMetadata
			if err := json.Unmarshal([]byte(out), &md); err != nil {
				t.Fatalf("parsing kcat -L -J output: %v\n%s", err, out)
			}
			if len(md.Brokers) != 1 || md.Brokers[0].ID != 1 || md.Brokers[0].Name != n.addr() {
				t.Errorf("brokers %+v, want [{1 %s}]", md.Brokers, n.addr())
			}
			if md.ControllerID != 1 {
				t.Errorf("controller id %d, want 1", md.ControllerID)
			}
			var listed []string
			for _, tp := range md.Topics {
				listed = append(listed, tp.Topic)
				if tp.Error != "" {
					t.Errorf("topic %s: error %q", tp.Topic, tp.Error)
				}
				if want := topics[tp.Topic]; len(tp.Partitions) != int(want) {
					t.Errorf("topic %s: %d partitions, want %d", tp.Topic, len(tp.Partitions), want)
				}
				for i, p := range tp.Partitions {
					ok := p.Partition == int32(i) && p.Leader == 1 && p.Error == "" &&
						len(p.Replicas) == 1 && p.Replicas[0].ID == 1 && len(p.ISRs) == 1 && p.ISRs[0].ID == 1
					if !ok {
						t.Errorf("topic %s partition %d: %+v, want partition %d led by 1, replicas and ISR [1]", tp.Topic, i, p, i)
					}
				}
			}
			slices.Sort(listed)
			if !slices.Equal(listed, c.want) {
				t.Errorf("topics %v, want %v\n%s", listed, c.want, out)
			}
		})
	}
}

// kcatLines are n "key:value" lines with compressible values.
func kcatLines(n int, tag string) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("key-%04d:%s", i, strings.Repeat(fmt.Sprintf("%s-value-%04d;", tag, i), 6))
	}
	return lines
}

// kcatConsume reads a whole single-partition topic as key:value:offset.
func kcatConsume(t *testing.T, addr, topic string) []string {
	t.Helper()
	out := runKcat(t, addr, "", "-C", "-t", topic, "-o", "beginning", "-e", "-f", `%k:%s:%o\n`)
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// withOffsets appends ":offset" to each line, the offsets of a single
// partition written in order.
func withOffsets(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fmt.Sprintf("%s:%d", l, i)
	}
	return out
}

// firstDiff describes where got and want first differ.
func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("got %d lines, want %d", len(got), len(want))
}

// TestKcatCodecs produces with each codec in both directions: kcat to kcat
// and kgo (which also reports the codec of the stored batches), and kgo to
// kcat.
func TestKcatCodecs(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	n := startNode(t)
	adm := newAdmin(t, n.addr())
	const count = 500
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			t.Run("kcat produces", func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t, 45*time.Second) // its own: it may wait for a parallel slot
				topic := "kcat-produced-" + c.name
				createTopic(t, ctx, adm, topic, 1, nil)
				lines := kcatLines(count, c.name)
				runKcat(t, n.addr(), strings.Join(lines, "\n")+"\n", "-P", "-t", topic, "-K:", "-z", c.name)

				want := withOffsets(lines)
				if got := kcatConsume(t, n.addr(), topic); !slices.Equal(got, want) {
					t.Fatalf("kcat consumed a different log: %s", firstDiff(got, want))
				}
				cons := newClient(t, n.addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
				for i, r := range pollN(t, ctx, cons, count) {
					if got := fmt.Sprintf("%s:%s:%d", r.Key, r.Value, r.Offset); got != want[i] {
						t.Fatalf("kgo record %d: %q, want %q", i, got, want[i])
					}
					if ct := r.Attrs.CompressionType(); ct != c.attr {
						t.Fatalf("offset %d: stored with compression %d, want %d (%s): %s",
							r.Offset, ct, c.attr, c.name, produceVersionsNote(t, ctx, n.addr()))
					}
				}
			})
			t.Run("kgo produces", func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t, 45*time.Second) // its own: it may wait for a parallel slot
				topic := "kgo-produced-" + c.name
				createTopic(t, ctx, adm, topic, 1, nil)
				lines := kcatLines(count, c.name)
				rs := make([]*kgo.Record, len(lines))
				for i, l := range lines {
					k, v, _ := strings.Cut(l, ":")
					rs[i] = &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)}
				}
				p := newClient(t, n.addr(), kgo.ProducerBatchCompression(c.codec), kgo.ProducerBatchMaxBytes(8<<10))
				produceAll(t, ctx, p, rs)
				if got, want := kcatConsume(t, n.addr(), topic), withOffsets(lines); !slices.Equal(got, want) {
					t.Fatalf("kcat consumed a different log: %s", firstDiff(got, want))
				}
			})
		})
	}
}

// produceVersionsNote explains the usual reason librdkafka sends a batch
// uncompressed: its feature checks read ApiVersions. Up to librdkafka 2.11,
// gzip, snappy and lz4 are only used when Produce v0 is advertised (the
// check wants Produce 0..0 to overlap the broker's range); Kafka 4.0
// dropped Produce v0-v2 yet still advertises v0 for that reason and rejects
// the actual requests (KAFKA-18659). lz4 also needs FindCoordinator v0
// (librdkafka's "LZ4" feature dates brokers by it). zstd needs Produce v7
// and Fetch v10.
func produceVersionsNote(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kmirror-tests", "0"
	resp := rawRequest(t, ctx, addr, req).(*kmsg.ApiVersionsResponse)
	ranges := map[int16]string{0: "none", 10: "none"}
	for _, k := range resp.ApiKeys {
		if _, ok := ranges[k.ApiKey]; ok {
			ranges[k.ApiKey] = fmt.Sprintf("v%d-v%d", k.MinVersion, k.MaxVersion)
		}
	}
	return fmt.Sprintf("ApiVersions advertises Produce %s and FindCoordinator %s; librdkafka <= 2.11 compresses "+
		"with gzip/snappy/lz4 only if Produce v0 is advertised, as Kafka 4.0 does (KAFKA-18659), and with lz4 "+
		"only if FindCoordinator v0 is too", ranges[0], ranges[10])
}
