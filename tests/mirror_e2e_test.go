package tests

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/fetch"
)

// The mirror fetchers end to end: a kfake source cluster, one kmirror node
// and a fetch.Manager that copies source partitions into the node's mirror
// topics. "Identical" always means the raw record batches read with Fetch
// from the source and from the node are the same bytes at the same offsets,
// control batches included.
//
// This file holds the tests of what is mirrored (codecs, transactions,
// producer ids, what consumers read); mirror_env_test.go the harness;
// mirror_faults_test.go the tests of a source that changes or fails under
// the mirror.

// mirrorFetchMaxBytes marks the mirror's own Fetch requests: every mirror of
// these tests asks for this odd response size (unless throttled, which
// lowers it), which no other client here uses, so kfake interceptors and
// faults can tell the mirror's fetches from the tests' raw reads and
// consumers, which fetch from the source too.
const mirrorFetchMaxBytes = 10<<20 - 13

// TestMirrorE2ECodecsAndTransactions mirrors, for every compression codec,
// idempotent batches and transactions (committed and aborted, with their
// markers), and checks the mirrored logs are byte-identical.
func TestMirrorE2ECodecsAndTransactions(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{})
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := env.in(t, 40*time.Second)
			topic := "codec-" + c.name
			env.createSourceTopic(topic, 3, nil)
			// Half the data is there before mirroring starts, half is
			// mirrored as it is written.
			produceTxnMix(t, env.ctx, env.seeds(), topic, c.codec, 3, false)
			env.mirrorTopic(topic)
			produceTxnMix(t, env.ctx, env.seeds(), topic, c.codec, 3, false)
			env.waitCaughtUp(topic)
			raw := env.checkIdentical(topic)

			// The comparison means something only if the source really
			// holds markers, transactional and compressed batches.
			for p, want := range map[int32]int{0: 6, 1: 6, 2: 0} {
				var markers, txnal, compressed int
				for _, b := range splitBatches(t, raw[p]) {
					switch {
					case b.IsControl():
						markers++
					case b.IsTransactional():
						txnal++
					}
					if int(b.Codec()) == int(c.attr) && c.attr != 0 {
						compressed++
					}
				}
				if markers != want || (want > 0) != (txnal > 0) || c.attr != 0 && compressed == 0 {
					t.Fatalf("%s-%d: %d markers (want %d), %d transactional, %d %s batches", topic, p, markers, want, txnal, compressed, c.name)
				}
			}
		})
	}
}

// consumeAll reads n records of topic from the start with a kgo consumer
// (read_committed or read_uncommitted) and returns them as sorted
// mirrorRecord strings.
func consumeAll(t *testing.T, ctx context.Context, seeds []string, topic string, readCommitted bool, n int) []string {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond)}
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := newClient(t, seeds[0], opts...)
	pctx, cancel := context.WithTimeout(ctx, mirrorCatchUp)
	defer cancel()
	return asMirrorRecords(pollN(t, pctx, cl, n))
}

// kcatConsumeAll reads the whole topic with kcat (librdkafka) at the given
// isolation level and returns the records as sorted mirrorRecord strings.
func kcatConsumeAll(t *testing.T, addr, topic, isolation string) []string {
	t.Helper()
	out := runKcat(t, addr, "", "-C", "-t", topic, "-o", "beginning", "-e", "-q",
		"-X", "isolation.level="+isolation, "-f", `%p:%o:%k:%s\n`)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		lines = nil
	}
	slices.Sort(lines)
	return lines
}

// checkSameRecords compares two sorted record lists.
func checkSameRecords(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %s", what, firstDiff(got, want))
	}
}

// TestMirrorE2EConsumers reads a mirrored log of committed and aborted
// transactions with kgo and kcat at both isolation levels: the node shows
// exactly what the source shows, aborted records hidden under
// read_committed.
func TestMirrorE2EConsumers(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{})
	const topic = "consumed"
	env.createSourceTopic(topic, 3, nil)
	mix := produceTxnMix(t, ctx, env.seeds(), topic, kgo.Lz4Compression(), 5, false)
	if len(mix.committed) == len(mix.all) {
		t.Fatal("no aborted records: the test proves nothing")
	}
	env.mirrorTopic(topic)
	env.waitCaughtUp(topic)
	env.checkIdentical(topic)

	for _, c := range []struct {
		name      string
		committed bool
		want      []string
	}{
		{"read_committed", true, mix.committed},
		{"read_uncommitted", false, mix.all},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			t.Run("kgo", func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t, 60*time.Second) // its own: it may wait for a parallel slot
				checkSameRecords(t, "kgo from the source", consumeAll(t, ctx, env.seeds(), topic, c.committed, len(c.want)), c.want)
				checkSameRecords(t, "kgo from the node", consumeAll(t, ctx, []string{env.n.addr()}, topic, c.committed, len(c.want)), c.want)
			})
			t.Run("kcat", func(t *testing.T) {
				t.Parallel()
				kcatPath(t)
				checkSameRecords(t, "kcat from the source", kcatConsumeAll(t, env.seeds()[0], topic, c.name), c.want)
				checkSameRecords(t, "kcat from the node", kcatConsumeAll(t, env.n.addr(), topic, c.name), c.want)
			})
		})
	}
}

// TestMirrorE2EProducerIDRewrite mirrors with producer.id.rewrite: every
// batch with a producer id, markers included, carries the source id plus
// 2^62 with a valid CRC and is otherwise the source's bytes; batches
// without one are untouched; read_committed still hides aborted records.
func TestMirrorE2EProducerIDRewrite(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{ProducerIDRewrite: true})
	const topic = "pid-rewrite"
	env.createSourceTopic(topic, 4, nil)
	mix := produceTxnMix(t, ctx, env.seeds(), topic, kgo.ZstdCompression(), 3, true)
	// Partition 3: batches without a producer id.
	plain := manualProducer(t, env.seeds(), kgo.DisableIdempotentWrite())
	produceBatchesTo(t, ctx, plain, topic, 3, 3, 5, "no-pid")
	env.mirrorTopic(topic)
	ends := env.waitCaughtUp(topic)

	// Offsets of the header fields the rewrite touches (RecordBatch v2).
	const (
		offCRC = 17
		offPID = 43
	)
	for p := range int32(4) {
		src := splitBatches(t, readRaw(t, ctx, env.srcCl, env.src.LeaderFor(topic, p), topic, p, 0, ends[p]))
		loc := splitBatches(t, readRaw(t, ctx, env.locCl, -1, topic, p, 0, ends[p])) // CRCs checked here
		if len(src) != len(loc) {
			t.Fatalf("partition %d: %d batches mirrored, the source has %d", p, len(loc), len(src))
		}
		rewritten, markers := 0, 0
		for i, s := range src {
			l := loc[i]
			want := s.ProducerID()
			if want >= 0 && want < 1<<62 {
				want += 1 << 62
				rewritten++
				if l.IsControl() {
					markers++
				}
			}
			if l.ProducerID() != want {
				t.Fatalf("partition %d batch at %d: producer id %d, want %d (source %d)", p, s.BaseOffset(), l.ProducerID(), want, s.ProducerID())
			}
			patched := bytes.Clone(s)
			copy(patched[offCRC:offCRC+4], l[offCRC:offCRC+4])
			copy(patched[offPID:offPID+8], l[offPID:offPID+8])
			if !bytes.Equal(patched, l) {
				t.Fatalf("partition %d batch at %d: differs from the source beyond producer id and CRC", p, s.BaseOffset())
			}
		}
		switch {
		case p < 2 && (rewritten == 0 || markers == 0), p == 2 && rewritten == 0:
			t.Fatalf("partition %d: %d batches rewritten, %d of them markers", p, rewritten, markers)
		case p == 3 && rewritten != 0:
			t.Fatalf("partition 3: %d batches without a producer id were rewritten", rewritten)
		}
	}

	extra := 15 // partition 3
	for _, c := range []struct {
		committed bool
		n         int
	}{{true, len(mix.committed) + extra}, {false, len(mix.all) + extra}} {
		want := consumeAll(t, ctx, env.seeds(), topic, c.committed, c.n)
		got := consumeAll(t, ctx, []string{env.n.addr()}, topic, c.committed, c.n)
		checkSameRecords(t, fmt.Sprintf("kgo from the node (read committed %v)", c.committed), got, want)
	}
}
