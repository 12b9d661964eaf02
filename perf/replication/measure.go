package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/realkafka"
)

// producerResult is kafka-producer-perf-test's total line: "N records
// sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency,
// P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th." MB is the
// tool's: 1024*1024 bytes of record values.
type producerResult struct {
	records             int64
	recordsPerSec       float64
	mbPerSec            float64
	avgMs, maxMs        float64
	p50, p95, p99, p999 float64
}

// parseProducerPerf reads the last total line of out (earlier lines are
// the tool's 5 s windows, which have no percentiles).
func parseProducerPerf(out string) (producerResult, error) {
	var total string
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
		if strings.Contains(l, " records sent, ") && strings.Contains(l, " 99.9th") {
			total = strings.TrimSpace(l)
		}
	}
	if total == "" {
		return producerResult{}, errors.New("no total line (N records sent, ... 99.9th.) in the output")
	}
	var r producerResult
	var err error
	// num is the number just before suffix in total.
	num := func(suffix string) float64 {
		i := strings.Index(total, suffix)
		if i < 0 {
			if err == nil {
				err = fmt.Errorf("no %q in %q", suffix, total)
			}
			return 0
		}
		head := strings.TrimRight(total[:i], " (")
		f := head[strings.LastIndexAny(head, " (")+1:]
		v, perr := strconv.ParseFloat(f, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("%q before %q is not a number in %q", f, suffix, total)
		}
		return v
	}
	r.records = int64(num(" records sent"))
	r.recordsPerSec = num(" records/sec")
	r.mbPerSec = num(" MB/sec")
	r.avgMs = num(" ms avg latency")
	r.maxMs = num(" ms max latency")
	r.p50 = num(" ms 50th")
	r.p95 = num(" ms 95th")
	r.p99 = num(" ms 99th")
	r.p999 = num(" ms 99.9th")
	return r, err
}

// consumerResult is kafka-consumer-perf-test's summary ("start.time,
// end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
// nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec,
// fetch.nMsg.sec"), MB in MiB of keys and values.
type consumerResult struct {
	mb, mbPerSec       float64
	records            int64
	recordsPerSec      float64
	rebalanceMs        int64
	fetchMs            int64
	fetchMBPerSec      float64
	fetchRecordsPerSec float64
}

// parseConsumerPerf finds the summary's header line and reads the line
// after it by column name (perf/mm2's parser), so that a new column does
// not shift the numbers.
func parseConsumerPerf(out string) (consumerResult, error) {
	lines := strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n")
	for i, line := range lines {
		if !strings.HasPrefix(strings.TrimSpace(line), "start.time,") || i+1 >= len(lines) {
			continue
		}
		cols, vals := splitCSV(line), splitCSV(lines[i+1])
		if len(vals) != len(cols) {
			return consumerResult{}, fmt.Errorf("summary has %d values for %d columns: %q", len(vals), len(cols), lines[i+1])
		}
		byName := map[string]string{}
		for j, c := range cols {
			byName[c] = vals[j]
		}
		var err error
		num := func(name string) float64 {
			v, ok := byName[name]
			if !ok {
				if err == nil {
					err = fmt.Errorf("no %s column", name)
				}
				return 0
			}
			f, perr := strconv.ParseFloat(v, 64)
			if perr != nil && err == nil {
				err = fmt.Errorf("column %s: %q is not a number", name, v)
			}
			return f
		}
		r := consumerResult{mb: num("data.consumed.in.MB"), mbPerSec: num("MB.sec"),
			records: int64(num("data.consumed.in.nMsg")), recordsPerSec: num("nMsg.sec"),
			rebalanceMs: int64(num("rebalance.time.ms")), fetchMs: int64(num("fetch.time.ms")),
			fetchMBPerSec: num("fetch.MB.sec"), fetchRecordsPerSec: num("fetch.nMsg.sec")}
		return r, err
	}
	return consumerResult{}, errors.New("no summary line (start.time, ...) in the output")
}

func splitCSV(line string) []string {
	f := strings.Split(line, ",")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// runProducerPerf runs kafka-producer-perf-test with acks=all into topic
// and returns its total line. Everything else is the producer's default
// (batch.size 16384, linger.ms 5, max.in.flight 5, idempotence on).
func runProducerPerf(ctx context.Context, libs string, c cluster, topic string, records, size int) (producerResult, string, error) {
	out, err := realkafka.Tool(ctx, libs, "kafka-producer-perf-test", "--topic", topic,
		"--num-records", strconv.Itoa(records), "--record-size", strconv.Itoa(size), "--throughput", "-1",
		"--producer-props", "bootstrap.servers="+bootstrap(c), "acks=all")
	if err != nil {
		return producerResult{}, out, fmt.Errorf("%s: %w", c.Name(), err)
	}
	r, err := parseProducerPerf(out)
	if err != nil {
		return r, out, fmt.Errorf("%s: kafka-producer-perf-test: %w\n%s", c.Name(), err, out)
	}
	if r.records != int64(records) {
		return r, out, fmt.Errorf("%s: kafka-producer-perf-test sent %d records, want %d:\n%s", c.Name(), r.records, records, out)
	}
	return r, out, nil
}

// runConsumerPerf reads every record of topic with
// kafka-consumer-perf-test in a fresh group and fails unless it read
// them all.
func runConsumerPerf(ctx context.Context, libs string, c cluster, topic string, records int64) (consumerResult, string, error) {
	out, err := realkafka.Tool(ctx, libs, "kafka-consumer-perf-test", "--bootstrap-server", bootstrap(c),
		"--topic", topic, "--num-records", strconv.FormatInt(records, 10),
		"--group", fmt.Sprintf("repl-perf-%d", time.Now().UnixNano()), "--timeout", "60000")
	if err != nil {
		return consumerResult{}, out, fmt.Errorf("%s: %w", c.Name(), err)
	}
	r, err := parseConsumerPerf(out)
	if err != nil {
		return r, out, fmt.Errorf("%s: kafka-consumer-perf-test: %w\n%s", c.Name(), err, out)
	}
	if r.records != records {
		return r, out, fmt.Errorf("%s: kafka-consumer-perf-test read %d records, want %d:\n%s", c.Name(), r.records, records, out)
	}
	return r, out, nil
}

// admin is a kadm client of every node of c.
func admin(c cluster) (*kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap(c), ",")...), kgo.RequestTimeoutOverhead(30*time.Second))
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// createTopic creates topic with partitions of replication factor 3 and
// min.insync.replicas=2, and waits until every partition has a leader and
// a full ISR.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	two := "2"
	resp, err := adm.CreateTopic(ctx, int32(partitions), 3, map[string]*string{"min.insync.replicas": &two}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	_, err = waitPartitions(ctx, adm, topic, partitions, time.Minute, "a leader and a full ISR", func(p kadm.PartitionDetail) bool {
		return p.Leader >= 0 && len(p.Replicas) == 3 && len(p.ISR) == 3
	})
	return err
}

// waitPartitions polls Metadata until all partitions of topic satisfy ok,
// and returns them by partition.
func waitPartitions(ctx context.Context, adm *kadm.Client, topic string, partitions int, within time.Duration, what string, ok func(kadm.PartitionDetail) bool) (map[int32]kadm.PartitionDetail, error) {
	deadline := time.Now().Add(within)
	var last string
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			t := md.Topics[topic]
			good := t.Err == nil && len(t.Partitions) == partitions
			for _, p := range t.Partitions {
				good = good && p.Err == nil && ok(p)
			}
			if good {
				return t.Partitions, nil
			}
			last = describePartitions(t.Partitions)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: no %s on every partition within %v; last: %s", topic, what, within, last)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func describePartitions(ps kadm.PartitionDetails) string {
	var b strings.Builder
	for _, p := range ps.Sorted() {
		fmt.Fprintf(&b, "p%d leader %d replicas %v isr %v err %v; ", p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
	}
	return b.String()
}

// replicaState is what verifyReplicas found: the partitions' end offsets
// (from their leaders) and each replica's log size (DescribeLogDirs of
// every broker).
type replicaState struct {
	ends  map[int32]int64
	sizes map[int32]map[int32]int64 // partition -> broker -> bytes
}

// verifyReplicas checks, polling for up to within, that every partition
// of topic has its three replicas in the ISR, that its replicas' logs are
// of one size on every broker (the followers copy the leader's batches
// byte for byte), and that the end offsets add up to records. It is what
// keeps the benchmark from measuring a cluster that does not replicate.
func verifyReplicas(ctx context.Context, adm *kadm.Client, topic string, partitions int, records int64, within time.Duration) (replicaState, error) {
	return pollReplicas(ctx, topic, within, func() (replicaState, error) {
		return replicaCheck(ctx, adm, topic, partitions, records)
	})
}

// pollReplicas runs check every 250 ms until it passes, for up to within;
// it returns check's last answer, with its error wrapped once time is up.
func pollReplicas[T any](ctx context.Context, topic string, within time.Duration, check func() (T, error)) (T, error) {
	deadline := time.Now().Add(within)
	for {
		st, err := check()
		if err == nil {
			return st, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return st, fmt.Errorf("%s: replicas not in step within %v: %w", topic, within, err)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func replicaCheck(ctx context.Context, adm *kadm.Client, topic string, partitions int, records int64) (replicaState, error) {
	st := replicaState{ends: map[int32]int64{}, sizes: map[int32]map[int32]int64{}}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return st, err
	}
	t := md.Topics[topic]
	if len(t.Partitions) != partitions {
		return st, fmt.Errorf("metadata lists %d partitions, want %d", len(t.Partitions), partitions)
	}
	for _, p := range t.Partitions.Sorted() {
		if p.Err != nil || len(p.Replicas) != 3 || !sameSet(p.ISR, p.Replicas) {
			return st, fmt.Errorf("partition %d: replicas %v, ISR %v, err %v", p.Partition, p.Replicas, p.ISR, p.Err)
		}
	}
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return st, err
	}
	var sum int64
	var lerr error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && lerr == nil {
			lerr = fmt.Errorf("end offset of partition %d: %w", o.Partition, o.Err)
		}
		st.ends[o.Partition] = o.Offset
		sum += o.Offset
	})
	if lerr != nil {
		return st, lerr
	}
	if sum != records {
		return st, fmt.Errorf("the end offsets %v add up to %d, want %d", st.ends, sum, records)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: allPartitions(partitions)})
	if err != nil {
		return st, fmt.Errorf("DescribeLogDirs: %w", err)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		for p, dp := range d.Topics[topic] {
			if st.sizes[p] == nil {
				st.sizes[p] = map[int32]int64{}
			}
			st.sizes[p][dp.Broker] += dp.Size
		}
	})
	for _, p := range t.Partitions.Sorted() {
		bs := st.sizes[p.Partition]
		if len(bs) != 3 {
			return st, fmt.Errorf("partition %d: DescribeLogDirs lists replicas on %d brokers (%v), want 3", p.Partition, len(bs), bs)
		}
		for _, sz := range bs {
			if sz != bs[p.Leader] {
				return st, fmt.Errorf("partition %d: replica sizes by broker %v differ (leader %d)", p.Partition, bs, p.Leader)
			}
		}
		if bs[p.Leader] == 0 && st.ends[p.Partition] > 0 {
			return st, fmt.Errorf("partition %d: %d records but DescribeLogDirs sizes %v", p.Partition, st.ends[p.Partition], bs)
		}
	}
	return st, nil
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// moveLeaders makes a former follower the leader of every partition of
// topic: it reorders each partition's replicas (the same three brokers,
// rotated by one, with AlterPartitionReassignments, which moves no data),
// then runs a preferred election (ElectLeaders), and waits until every
// partition is led by its new first replica. It returns the leaders
// before and after.
func moveLeaders(ctx context.Context, adm *kadm.Client, topic string, partitions int) (before, after map[int32]int32, err error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	before, after = map[int32]int32{}, map[int32]int32{}
	var req kadm.AlterPartitionAssignmentsReq
	for _, p := range md.Topics[topic].Partitions.Sorted() {
		i := slices.Index(p.Replicas, p.Leader)
		if i < 0 {
			return nil, nil, fmt.Errorf("%s/%d: leader %d is not among the replicas %v", topic, p.Partition, p.Leader, p.Replicas)
		}
		// The next replica after the leader goes first, the leader last.
		rot := append(slices.Clone(p.Replicas[i+1:]), p.Replicas[:i+1]...)
		req.Assign(topic, p.Partition, rot)
		before[p.Partition], after[p.Partition] = p.Leader, rot[0]
	}
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("AlterPartitionReassignments: %w", err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil {
			return nil, nil, fmt.Errorf("AlterPartitionReassignments of %s/%d: %w (%s)", r.Topic, r.Partition, r.Err, r.ErrMessage)
		}
	}
	if _, err := waitPartitions(ctx, adm, topic, partitions, time.Minute, "reordered replica list", func(p kadm.PartitionDetail) bool {
		return len(p.Replicas) == 3 && p.Replicas[0] == after[p.Partition]
	}); err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ls, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: allPartitions(partitions)})
		if err != nil {
			return nil, nil, fmt.Errorf("ListPartitionReassignments: %w", err)
		}
		under := 0
		for _, ps := range ls {
			under += len(ps)
		}
		if under == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("%s: reassignments still under way after a minute: %v", topic, ls)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: allPartitions(partitions)})
	if err != nil {
		return nil, nil, fmt.Errorf("ElectLeaders: %w", err)
	}
	for _, ps := range res {
		for p, r := range ps {
			if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				return nil, nil, fmt.Errorf("ElectLeaders of %s/%d: %w (%s)", topic, p, r.Err, r.ErrMessage)
			}
		}
	}
	if _, err := waitPartitions(ctx, adm, topic, partitions, time.Minute, "leader moved to a former follower", func(p kadm.PartitionDetail) bool {
		return p.Leader == after[p.Partition] && p.Leader != before[p.Partition]
	}); err != nil {
		return nil, nil, err
	}
	return before, after, nil
}

func allPartitions(n int) map[int32]struct{} {
	m := map[int32]struct{}{}
	for i := range n {
		m[int32(i)] = struct{}{}
	}
	return m
}

// deleteTopic deletes topic so that the next run starts on empty disks.
func deleteTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("deleting %s: %w", topic, err)
	}
	return nil
}
