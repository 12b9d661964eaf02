package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/perf/internal/pagecache"
)

// The catch-up measurement (issue 21: "a follower catching up should
// reach the same ratio" as the mirror's fetch against a plain drain).
//
// On one system: create a topic of --partitions partitions whose
// replicas are on the first two nodes only (manual assignment, the
// leaders alternating between them), min.insync.replicas=2; fill it with
// --catchup-bytes of record values (kafka-producer-perf-test, acks=all);
// wait until both replicas hold everything. Then the ceiling: drain every
// partition from its leader with plain Fetch requests, one connection
// per leader as a follower's fetcher has, at the follower's default
// sizes, the data discarded. Then add the third node as a replica of
// every partition (AlterPartitionReassignments) and time, polling every
// catchupPoll, until the third node's log of every partition
// (DescribeLogDirs) is as large as the leader's and the third node is
// in every partition's ISR.

// The follower's defaults (replica.fetch.*), what the drain asks with.
const (
	followerFetchWait          = 500 * time.Millisecond
	followerFetchMinBytes      = 1
	followerFetchMaxBytes      = 1 << 20
	followerFetchResponseBytes = 10 << 20
	catchupPoll                = 25 * time.Millisecond
)

// catchupResult is one system's catch-up measurement.
type catchupResult struct {
	system     string
	partitions int
	newReplica int32
	leaders    map[int32]int32 // partition -> leader
	records    int64
	bytes      int64 // the leaders' log bytes, summed over the partitions
	fill       producerResult
	took       time.Duration // the reassignment's request to the poll that saw it done
	resolution time.Duration // that poll's end minus the start of the one before it
	bytesAt    time.Duration // the reassignment's request to the first poll that saw every byte copied
	firstBytes time.Duration // ... to the first poll that saw the new replica hold any byte
	polls      int
	drain      drainResult
}

// drainResult is the Fetch drain of the same partitions from the same
// leaders.
type drainResult struct {
	bytes    int64 // complete record batches received
	took     time.Duration
	requests int
}

// mibPerSec is bytes per second in MiB (the perf tools' MB).
func mibPerSec(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / (1 << 20) / d.Seconds()
}

// runCatchup is the measurement on c.
func runCatchup(ctx context.Context, o options, libs string, c cluster, log *slog.Logger) (catchupResult, error) {
	res := catchupResult{system: c.Name(), partitions: o.partitions}
	ids := c.IDs()
	if len(ids) != 3 {
		return res, fmt.Errorf("%s: catch-up wants 3 nodes, have %v", c.Name(), ids)
	}
	// kgo answers a Metadata request from its cache for MetadataMinAge
	// (5 s by default): the ISR poll must see the brokers' answer.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap(c), ",")...), kgo.RequestTimeoutOverhead(30*time.Second),
		kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := fmt.Sprintf("catchup-%d", o.partitions)
	res.newReplica = ids[2]
	assign := map[int32][]int32{}
	for p := range int32(o.partitions) {
		assign[p] = []int32{ids[p%2], ids[(p+1)%2]}
	}
	if err := createAssigned(ctx, cl, topic, assign); err != nil {
		return res, fmt.Errorf("%s: %w", c.Name(), err)
	}
	if _, err := waitPartitions(ctx, adm, topic, o.partitions, time.Minute, "a leader and both replicas in the ISR", func(p kadm.PartitionDetail) bool {
		return p.Leader == assign[p.Partition][0] && len(p.ISR) == 2
	}); err != nil {
		return res, fmt.Errorf("%s: %w", c.Name(), err)
	}
	records := max(1, o.catchupBytes/int64(o.recordSize))
	res.records = records
	log.Info("catch-up: filling", "system", c.Name(), "topic", topic, "records", records)
	fill, out, err := runProducerPerf(ctx, libs, c, topic, int(records), o.recordSize)
	if err != nil {
		return res, fmt.Errorf("catch-up fill: %w\n%s", err, out)
	}
	res.fill = fill
	sizes, err := waitTwoReplicas(ctx, adm, topic, assign, records, 2*time.Minute)
	if err != nil {
		return res, fmt.Errorf("%s: catch-up fill: %w", c.Name(), err)
	}
	res.leaders = map[int32]int32{}
	for p, rs := range assign {
		res.leaders[p] = rs[0]
		res.bytes += sizes[p]
	}

	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return res, err
	}
	res.drain, err = drain(ctx, cl, topic, md.Topics[topic].ID, res.leaders)
	if err != nil {
		return res, fmt.Errorf("%s: drain: %w", c.Name(), err)
	}
	log.Info("catch-up: drained", "system", c.Name(), "mib_per_s", fmt.Sprintf("%.1f", mibPerSec(res.drain.bytes, res.drain.took)),
		"requests", res.drain.requests)

	if err := pagecache.WarmFreePages(res.bytes + res.bytes/4); err != nil {
		return res, fmt.Errorf("%s: %w", c.Name(), err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	for p, rs := range assign {
		req.Assign(topic, p, append(slices.Clone(rs), res.newReplica))
	}
	began := time.Now()
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return res, fmt.Errorf("%s: AlterPartitionReassignments: %w", c.Name(), err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil {
			return res, fmt.Errorf("%s: AlterPartitionReassignments of %s/%d: %w (%s)", c.Name(), r.Topic, r.Partition, r.Err, r.ErrMessage)
		}
	}
	deadline := began.Add(5 * time.Minute)
	prev := began
	var last string
	for {
		start := time.Now()
		res.polls++
		done, st, why, err := caughtUp(ctx, adm, topic, res.newReplica, sizes)
		end := time.Now()
		if st.any && res.firstBytes == 0 {
			res.firstBytes = end.Sub(began)
		}
		if st.all && res.bytesAt == 0 {
			res.bytesAt = end.Sub(began)
		}
		if err == nil && done {
			res.took, res.resolution = end.Sub(began), end.Sub(prev)
			break
		}
		if err != nil {
			why = err.Error()
		}
		last = why
		if end.After(deadline) {
			return res, fmt.Errorf("%s: node %d not caught up within 5m: %s", c.Name(), res.newReplica, last)
		}
		prev = start
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(catchupPoll - end.Sub(start)):
		}
	}
	log.Info("catch-up: caught up", "system", c.Name(), "took", res.took.Round(time.Millisecond),
		"first_bytes_at", res.firstBytes.Round(time.Millisecond), "bytes_at", res.bytesAt.Round(time.Millisecond),
		"mib_per_s", fmt.Sprintf("%.1f", mibPerSec(res.bytes, res.took)), "polls", res.polls)
	if err := deleteTopic(ctx, adm, topic); err != nil {
		return res, fmt.Errorf("%s: %w", c.Name(), err)
	}
	return res, nil
}

// createAssigned creates topic with the replica lists of assign and
// min.insync.replicas=2.
func createAssigned(ctx context.Context, cl *kgo.Client, topic string, assign map[int32][]int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p := range int32(len(assign)) {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, assign[p]
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	two := "2"
	cfg.Name, cfg.Value = "min.insync.replicas", &two
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			msg := ""
			if t.ErrorMessage != nil {
				msg = *t.ErrorMessage
			}
			return fmt.Errorf("creating %s: %w (%s)", topic, err, msg)
		}
	}
	return nil
}

// waitTwoReplicas waits until every partition's two replicas are in the
// ISR and of one size, and the end offsets add up to records; it returns
// the leaders' sizes by partition.
func waitTwoReplicas(ctx context.Context, adm *kadm.Client, topic string, assign map[int32][]int32, records int64, within time.Duration) (map[int32]int64, error) {
	return pollReplicas(ctx, topic, within, func() (map[int32]int64, error) {
		return twoReplicasCheck(ctx, adm, topic, assign, records)
	})
}

func twoReplicasCheck(ctx context.Context, adm *kadm.Client, topic string, assign map[int32][]int32, records int64) (map[int32]int64, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	for _, p := range md.Topics[topic].Partitions.Sorted() {
		if p.Err != nil || !sameSet(p.ISR, assign[p.Partition]) || !sameSet(p.Replicas, assign[p.Partition]) {
			return nil, fmt.Errorf("partition %d: replicas %v, ISR %v, err %v", p.Partition, p.Replicas, p.ISR, p.Err)
		}
	}
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	var sum int64
	lo.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	if sum != records {
		return nil, fmt.Errorf("the end offsets add up to %d, want %d", sum, records)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: allPartitions(len(assign))})
	if err != nil {
		return nil, fmt.Errorf("DescribeLogDirs: %w", err)
	}
	by := map[int32]map[int32]int64{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		for p, dp := range d.Topics[topic] {
			if by[p] == nil {
				by[p] = map[int32]int64{}
			}
			by[p][dp.Broker] += dp.Size
		}
	})
	sizes := map[int32]int64{}
	for p, rs := range assign {
		a, b := by[p][rs[0]], by[p][rs[1]]
		if a == 0 || a != b || len(by[p]) != 2 {
			return nil, fmt.Errorf("partition %d: sizes by broker %v, want two equal", p, by[p])
		}
		sizes[p] = a
	}
	return sizes, nil
}

// copied is what one catch-up poll saw of the new replica's bytes.
type copied struct{ any, all bool }

// caughtUp reports whether node holds as many bytes of every partition
// of topic as want and is in every partition's ISR, and if not, why.
func caughtUp(ctx context.Context, adm *kadm.Client, topic string, node int32, want map[int32]int64) (bool, copied, string, error) {
	var st copied
	dirs, err := adm.DescribeBrokerLogDirs(ctx, node, kadm.TopicsSet{topic: allPartitions(len(want))})
	if err != nil {
		return false, st, "", fmt.Errorf("DescribeLogDirs of node %d: %w", node, err)
	}
	have := map[int32]int64{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		for p, dp := range d.Topics[topic] {
			have[p] += dp.Size
		}
	})
	for _, n := range have {
		st.any = st.any || n > 0
	}
	if why := sizesBehind(have, want); why != "" {
		return false, st, why, nil
	}
	st.all = true
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return false, st, "", err
	}
	for _, p := range md.Topics[topic].Partitions.Sorted() {
		if p.Err != nil || !slices.Contains(p.ISR, node) {
			return false, st, fmt.Sprintf("partition %d: ISR %v without node %d (err %v)", p.Partition, p.ISR, node, p.Err), nil
		}
	}
	return true, st, "", nil
}

// sizesBehind is "" when have holds want's size for every partition,
// else the partitions still short (have is never more than want: the
// follower copies the leader's batches byte for byte).
func sizesBehind(have, want map[int32]int64) string {
	var short []string
	for p := range int32(len(want)) {
		if have[p] != want[p] {
			short = append(short, fmt.Sprintf("p%d %d/%d", p, have[p], want[p]))
		}
	}
	if len(short) == 0 {
		return ""
	}
	return "bytes behind: " + strings.Join(short, ", ")
}

// batchesEnd walks the RecordBatches of one Fetch partition answer and
// returns the offset after the last complete batch and the bytes of the
// complete batches. A batch cut short at the end (the fetch size) is not
// counted; ok is false when no complete batch is there.
func batchesEnd(b []byte) (next int64, bytes int, ok bool) {
	const (
		lengthEnd = 12 // baseOffset int64, batchLength int32
		headerLen = 61 // the v2 batch header before the records
		deltaAt   = 23 // lastOffsetDelta int32
	)
	for len(b) >= lengthEnd {
		n := int(int32(binary.BigEndian.Uint32(b[8:12])))
		if n < headerLen-lengthEnd || n > len(b)-lengthEnd {
			break
		}
		base := int64(binary.BigEndian.Uint64(b[0:8]))
		next = base + int64(int32(binary.BigEndian.Uint32(b[deltaAt:deltaAt+4]))) + 1
		bytes += lengthEnd + n
		ok = true
		b = b[lengthEnd+n:]
	}
	return next, bytes, ok
}

// drain reads every partition of topic from offset 0 to its end from
// its leader: one connection (kgo's fetch connection to that broker) and
// one goroutine per leader, plain full Fetch requests (no session) with
// the follower's default sizes, the record batches discarded.
func drain(ctx context.Context, cl *kgo.Client, topic string, id [16]byte, leaders map[int32]int32) (drainResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return drainResult{}, err
	}
	ends := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	byLeader := map[int32][]int32{}
	for p, l := range leaders {
		byLeader[l] = append(byLeader[l], p)
	}
	var (
		mu   sync.Mutex
		res  drainResult
		errs []error
		wg   sync.WaitGroup
	)
	began := time.Now()
	for l, ps := range byLeader {
		slices.Sort(ps)
		wg.Add(1)
		go func() {
			defer wg.Done()
			bytes, reqs, err := drainLeader(ctx, cl.Broker(int(l)), topic, id, ps, ends)
			mu.Lock()
			defer mu.Unlock()
			res.bytes += bytes
			res.requests += reqs
			if err != nil {
				errs = append(errs, fmt.Errorf("from node %d: %w", l, err))
			}
		}()
	}
	wg.Wait()
	res.took = time.Since(began)
	return res, errors.Join(errs...)
}

func drainLeader(ctx context.Context, b *kgo.Broker, topic string, id [16]byte, ps []int32, ends map[int32]int64) (int64, int, error) {
	at := map[int32]int64{}
	var total int64
	reqs := 0
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, int32(followerFetchWait.Milliseconds()), followerFetchMinBytes, followerFetchResponseBytes
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		for _, p := range ps {
			if at[p] >= ends[p] {
				continue
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, at[p], followerFetchMaxBytes
			rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) == 0 {
			return total, reqs, nil
		}
		req.Topics = append(req.Topics, rt)
		reqs++
		kr, err := b.Request(ctx, req)
		if err != nil {
			return total, reqs, err
		}
		resp := kr.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return total, reqs, err
		}
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return total, reqs, fmt.Errorf("partition %d at %d: %w", rp.Partition, at[rp.Partition], err)
				}
				if next, n, ok := batchesEnd(rp.RecordBatches); ok {
					at[rp.Partition] = next
					total += int64(n)
				}
			}
		}
	}
}
