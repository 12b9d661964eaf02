package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/node"
)

// demoNode is one in-process kmirror node of the demo, with a client that
// speaks the mirror RPCs.
type demoNode struct {
	*node.Node
	name string
	cl   *kgo.Client
}

func startDemoNode(name, dir string, log *slog.Logger) (*demoNode, error) {
	cfg := broker.DefaultConfig()
	cfg.Listeners = []broker.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
	cfg.LogDirs = []string{dir}
	cfg.MetricsListener = ""
	cfg.GroupInitialRebalanceDelay = 0
	cfg.Logger = log.With("node", name)
	n, err := node.Start(cfg, control.Config{})
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)))
	if err != nil {
		n.Close()
		return nil, err
	}
	return &demoNode{Node: n, name: name, cl: cl}, nil
}

func (n *demoNode) close() {
	n.cl.Close()
	n.Close()
}

// runDemo is `kmirror demo` (`make demo`): two nodes on loopback, a mirror,
// a failover and a failback, in under a minute.
func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	records := fs.Int("records", 30000, "records to produce to the source")
	verbose := fs.Bool("verbose", false, "show the nodes' logs")
	cluster := fs.Bool("cluster", false, "mirror into a cluster of three nodes instead (make demo-cluster)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: kmirror demo [--cluster] [--records N] [--verbose]\n\n"+
			"Starts node A (the source) and node B on free loopback ports with temporary dirs, produces\n"+
			"lz4 data to A, mirrors it to B, checks the copy is byte for byte, fails over to B, produces\n"+
			"there (also a committed and an aborted transaction, read back read_committed), fails back to\n"+
			"A and prints a summary.\n\n"+
			"--cluster: a source node and a destination cluster of three nodes (replication factor 3):\n"+
			"mirrors, stops the node leading the most partitions mid-mirroring, checks that the new leaders\n"+
			"mirrored on byte for byte, fails over with that node down, and resumes a consumer group there.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	level := slog.LevelError + 4
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := demo
	if *cluster {
		run = demoCluster
	}
	if err := run(ctx, *records, stdout, log); err != nil {
		fmt.Fprintf(stderr, "kmirror demo: %v\n", err)
		return 1
	}
	return 0
}

const demoTopic = "orders"

func demo(ctx context.Context, records int, out io.Writer, log *slog.Logger) error {
	start := time.Now()
	dir, err := os.MkdirTemp("", "kmirror-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	a, err := startDemoNode("A", dir+"/a", log)
	if err != nil {
		return fmt.Errorf("starting node A: %w", err)
	}
	defer a.close()
	bn, err := startDemoNode("B", dir+"/b", log)
	if err != nil {
		return fmt.Errorf("starting node B: %w", err)
	}
	defer bn.close()
	rep := &demoReport{out: out, start: start, width: 52}
	step := rep.step
	fmt.Fprintf(out, "node A (source) %s, node B (mirror) %s\n\n", a.Addr(), bn.Addr())

	// 1. Data on A: lz4 batches from an idempotent producer.
	if _, err := kadm.NewClient(a.cl).CreateTopic(ctx, 3, 1, nil, demoTopic); err != nil {
		return fmt.Errorf("creating %s on A: %w", demoTopic, err)
	}
	if err := produceDemo(ctx, a.Addr(), records, "a"); err != nil {
		return err
	}
	step("produce lz4 records (idempotent) on A", fmt.Sprintf("%d records", records))

	// 2. Mirror A -> B.
	if err := mirrorTo(ctx, bn, "dr", a.Addr()); err != nil {
		return err
	}
	step("create mirror dr on B, start "+demoTopic, "ok")
	if err := waitCaughtUp(ctx, bn, "dr", out); err != nil {
		return err
	}
	if err := sameBytes(ctx, a, bn); err != nil {
		return err
	}
	step("B caught up; offsets and bytes identical", "yes")

	// 3. Failover to B.
	synced, err := stopDemoTopic(ctx, bn.cl, "dr")
	if err != nil {
		return err
	}
	step("failover: stop mirroring on B (writable)", synced)
	if err := produceDemo(ctx, bn.Addr(), 1000, "b"); err != nil {
		return fmt.Errorf("producing on B after failover: %w", err)
	}
	step("produce 1000 records on B", "ok")

	// 3b. Transactions on the new primary, through B's own transaction
	// coordinator: one aborted, then one committed. A read_committed
	// consumer of that range must see the committed records only.
	txnStart, err := endOffsets(ctx, bn)
	if err != nil {
		return err
	}
	if err := produceDemoTxns(ctx, bn.Addr(), demoTxnRecords); err != nil {
		return fmt.Errorf("transactions on B: %w", err)
	}
	step(fmt.Sprintf("transactions on B: abort %d records, commit %d", demoTxnRecords, demoTxnRecords), "ok")
	seen, err := readDemoTxns(ctx, bn.Addr(), txnStart)
	if err != nil {
		return fmt.Errorf("reading the transactions on B: %w", err)
	}
	step("read_committed on B: committed records only", seen)

	// 4. Failback: A mirrors B's delta, then stops.
	if err := mirrorTo(ctx, a, "back", bn.Addr()); err != nil {
		return err
	}
	if err := waitCaughtUp(ctx, a, "back", out); err != nil {
		return err
	}
	if err := sameBytes(ctx, a, bn); err != nil {
		return err
	}
	step("failback: A mirrored B's delta; identical", "yes")
	// A's log is B's byte for byte, offsets included, so the same range
	// holds the mirrored transactions, their markers and aborted index.
	if seen, err = readDemoTxns(ctx, a.Addr(), txnStart); err != nil {
		return fmt.Errorf("reading the mirrored transactions on A: %w", err)
	}
	step("read_committed on A (mirrored): committed only", seen)
	synced, err = stopDemoTopic(ctx, a.cl, "back")
	if err != nil {
		return err
	}
	step("stop the failback mirror: A is the primary again", synced)
	if err := produceDemo(ctx, a.Addr(), 100, "a2"); err != nil {
		return err
	}
	step("produce on A", "ok")

	rep.summary()
	return nil
}

// demoReport prints a demo's steps as they pass, then a summary table.
type demoReport struct {
	out   io.Writer
	start time.Time
	width int // of the step column as the steps pass
	steps [][2]string
}

func (r *demoReport) step(what, result string) {
	r.steps = append(r.steps, [2]string{what, result})
	fmt.Fprintf(r.out, "%-*s %s  (%.1fs)\n", r.width, what, result, time.Since(r.start).Seconds())
}

func (r *demoReport) summary() {
	fmt.Fprintln(r.out)
	tw := tabwriter.NewWriter(r.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tRESULT")
	for _, s := range r.steps {
		fmt.Fprintf(tw, "%s\t%s\n", s[0], s[1])
	}
	tw.Flush()
	fmt.Fprintf(r.out, "\ndemo done in %.1fs\n", time.Since(r.start).Seconds())
}

// produceDemo writes n records, lz4-compressed, with an idempotent
// producer.
func produceDemo(ctx context.Context, addr string, n int, tag string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(demoTopic),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 97)), Value: []byte(fmt.Sprintf(`{"from":%q,"n":%d}`, tag, i))}, nil)
	}
	return cl.Flush(ctx)
}

// demoTxnRecords is the size of each demo transaction.
const demoTxnRecords = 30

// produceDemoTxns runs two transactions of n records each (spread over the
// 3 partitions) with a transactional producer: the first is aborted, the
// second committed. Aborting first means that in every partition the
// aborted records come before the committed ones, so a read_committed
// reader that got all the committed records has passed every aborted one.
func produceDemoTxns(ctx context.Context, addr string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(demoTopic),
		kgo.TransactionalID("demo-orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, commit := range []bool{false, true} {
		tag := "aborted"
		if commit {
			tag = "committed"
		}
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Partition: int32(i % 3), Key: []byte(fmt.Sprint(i % 97)),
				Value: []byte(fmt.Sprintf(`{"from":"b","txn":%q,"n":%d}`, tag, i))}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("producing the %s transaction: %w", tag, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			return fmt.Errorf("ending the %s transaction: %w", tag, err)
		}
	}
	return nil
}

// endOffsets are n's log end offsets of the demo topic, by partition.
func endOffsets(ctx context.Context, n *demoNode) (map[int32]kgo.Offset, error) {
	ends, err := kadm.NewClient(n.cl).ListEndOffsets(ctx, demoTopic)
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, err
	}
	out := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = kgo.NewOffset().At(o.Offset) })
	return out, nil
}

// readDemoTxns reads the two demo transactions from the offsets at which
// they began, read_uncommitted (all 2*demoTxnRecords records must be in
// the log) then read_committed (demoTxnRecords records, every one from the
// committed transaction), and describes what the read_committed consumer
// saw.
func readDemoTxns(ctx context.Context, addr string, from map[int32]kgo.Offset) (string, error) {
	count := func(level kgo.IsolationLevel, want int) (committed, aborted int, err error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(level),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{demoTopic: from}))
		if err != nil {
			return 0, 0, err
		}
		defer cl.Close()
		for committed+aborted < want {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				return committed, aborted, err
			}
			fs.EachRecord(func(r *kgo.Record) {
				switch {
				case strings.Contains(string(r.Value), `"txn":"committed"`):
					committed++
				case strings.Contains(string(r.Value), `"txn":"aborted"`):
					aborted++
				}
			})
		}
		return committed, aborted, nil
	}
	c, a, err := count(kgo.ReadUncommitted(), 2*demoTxnRecords)
	if err != nil {
		return "", fmt.Errorf("read_uncommitted: %w", err)
	}
	if c != demoTxnRecords || a != demoTxnRecords {
		return "", fmt.Errorf("read_uncommitted saw %d committed and %d aborted records, want %d of each", c, a, demoTxnRecords)
	}
	if c, a, err = count(kgo.ReadCommitted(), demoTxnRecords); err != nil {
		return "", fmt.Errorf("read_committed: %w", err)
	}
	if c != demoTxnRecords || a != 0 {
		return "", fmt.Errorf("read_committed saw %d committed and %d aborted records, want %d and 0", c, a, demoTxnRecords)
	}
	return fmt.Sprintf("%d committed, 0 aborted (%d in the log)", c, 2*demoTxnRecords), nil
}

// stopDemoTopic fails the demo topic over (StopMirrorTopics on mirror)
// and says how its final sync went. One that did not run, or failed, is
// an error: the demo's source is up, so the stop must bring the group
// offsets over, and a failover that left them behind must not print ok.
func stopDemoTopic(ctx context.Context, cl *kgo.Client, mirror string) (string, error) {
	req := mirrorapi.NewPtrStopMirrorTopicsRequest()
	req.MirrorName = mirror
	req.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: demoTopic}}
	resp, err := mirrorCall(ctx, cl, req)
	if err != nil {
		return "", err
	}
	for _, t := range resp.(*mirrorapi.StopMirrorTopicsResponse).Topics {
		if t.Name != demoTopic {
			continue
		}
		if t.FinalSync != mirrorapi.FinalSyncDone {
			why := "no reason given"
			if t.FinalSyncMessage != nil {
				why = *t.FinalSyncMessage
			}
			return "", fmt.Errorf("stopping %s: its final sync did not complete (status %d): %s", demoTopic, t.FinalSync, why)
		}
		return "final sync done", nil
	}
	return "", fmt.Errorf("stopping %s: the answer does not name the topic", demoTopic)
}

// mirrorTo creates a mirror on n from source and starts the demo topic.
func mirrorTo(ctx context.Context, n *demoNode, name, source string) error {
	create := mirrorapi.NewPtrCreateClusterMirrorRequest()
	create.MirrorName = name
	create.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{
		{Name: "bootstrap.servers", Value: &source},
		{Name: "mirror.fetch.wait.max.ms", Value: ptr("200")},
	}
	if err := mirrorRPC(ctx, n.cl, create); err != nil {
		return err
	}
	startReq := mirrorapi.NewPtrStartMirrorTopicsRequest()
	startReq.MirrorName = name
	startReq.Topics = []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: demoTopic}}
	return mirrorRPC(ctx, n.cl, startReq)
}

func ptr(s string) *string { return &s }

// mirrorRPC sends a mirror request and turns its error codes into an error.
func mirrorRPC(ctx context.Context, cl *kgo.Client, req kmsg.Request) error {
	_, err := mirrorCall(ctx, cl, req)
	return err
}

// mirrorCall is mirrorRPC that also returns the answer.
func mirrorCall(ctx context.Context, cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
	resp, err := requestMirror(ctx, cl, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mirrorapi.NameForKey(req.Key()), err)
	}
	if err := responseError(resp); err != nil {
		return nil, fmt.Errorf("%s: %w", mirrorapi.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// waitCaughtUp prints the describe table until every partition's lag is 0.
func waitCaughtUp(ctx context.Context, n *demoNode, mirror string, out io.Writer) error {
	f := &mirrorsFlags{mirror: mirror}
	for {
		req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
		req.MirrorNames = []string{mirror}
		resp, err := n.cl.Request(ctx, req)
		if err != nil {
			return err
		}
		d := resp.(*mirrorapi.DescribeClusterMirrorsResponse)
		done := len(d.Mirrors) == 1 && len(d.Mirrors[0].Topics) > 0
		for _, m := range d.Mirrors {
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					if p.Lag != 0 {
						done = false
					}
				}
			}
		}
		if done {
			var sb strings.Builder
			f.print("describe", d, &sb)
			fmt.Fprintf(out, "\n%s\n", sb.String())
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mirror %s did not catch up: %w", mirror, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sameBytes compares, per partition, the log end offsets and a hash of
// the raw batches both nodes serve.
func sameBytes(ctx context.Context, a, b *demoNode) error {
	for p := int32(0); p < 3; p++ {
		ha, ea, err := partitionHash(ctx, a.cl, demoTopic, topicID(a), p)
		if err != nil {
			return fmt.Errorf("node %s: %w", a.name, err)
		}
		hb, eb, err := partitionHash(ctx, b.cl, demoTopic, topicID(b), p)
		if err != nil {
			return fmt.Errorf("node %s: %w", b.name, err)
		}
		if ea != eb || ha != hb {
			return fmt.Errorf("partition %d differs: end %d vs %d", p, ea, eb)
		}
	}
	return nil
}

func topicID(n *demoNode) [16]byte {
	info, _ := n.Broker.Partitions().Info(demoTopic)
	return info.ID
}

// partitionHash reads a partition's raw batches with Fetch (by name or id,
// whichever version the client picks) and hashes them; it returns the
// offset after the last batch.
func partitionHash(ctx context.Context, cl *kgo.Client, topic string, id [16]byte, p int32) ([32]byte, int64, error) {
	h := sha256.New()
	offset := int64(0)
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 0, 10<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 10<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.Request(ctx, req)
		if err != nil {
			return [32]byte{}, 0, err
		}
		resp := kresp.(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return [32]byte{}, 0, errors.New("malformed fetch response")
		}
		part := resp.Topics[0].Partitions[0]
		if part.ErrorCode != 0 {
			return [32]byte{}, 0, mirrorapi.ErrorForCode(part.ErrorCode)
		}
		data := part.RecordBatches
		progressed := false
		for len(data) >= 12 {
			var rb kmsg.RecordBatch
			if rb.ReadFrom(data) != nil || int(rb.Length)+12 > len(data) {
				break
			}
			size := int(rb.Length) + 12
			if next := rb.FirstOffset + int64(rb.LastOffsetDelta) + 1; next > offset {
				h.Write(data[:size])
				offset, progressed = next, true
			}
			data = data[size:]
		}
		if !progressed {
			var sum [32]byte
			copy(sum[:], h.Sum(nil))
			return sum, offset, nil
		}
	}
}
