package main

// --share: share consumers (KIP-932) on both systems. Both get
// group.coordinator.rebalance.protocols=classic,consumer,share (kmirror
// serves share groups only with it; Kafka 4.4 has them on through the
// share.version feature, which a cluster formatted at 4.4 finalizes at 1,
// and accepts the list as it is). The setup checks both: ApiVersions must
// list ShareGroupHeartbeat and ShareFetch, and the report names the
// finalized share.version.
//
// 1. Throughput. A topic of --share-partitions partitions (replication
// factor 3) holds --share-records records of --share-record-bytes bytes,
// record i in partition i%P at offset i/P, its value starting with i,
// produced with acks=all in batches of at most 16 KiB. A
// read: a fresh share group, its start offsets set to 0
// (AlterShareGroupOffsets; share.auto.offset.reset=earliest as a GROUP
// config where that fails), then C kgo share consumers (kgo.ShareGroup,
// implicit acknowledgement: a poll accepts the records of the one before)
// started at once, each polling in its own goroutine, until every record
// has been read; each (partition, offset) is counted once, a second
// delivery is a duplicate, a value that does not hold its own index is
// corrupt. After the last new record the consumers poll one more second
// (late duplicates) and are closed. records/s is N over the time from
// just before the first client is made to the last new record; "after
// first" is N over the time from the first record to the last. Each of
// --share-consumers cells runs --share-rounds reads per system, the
// systems alternating (AB, BA, ...), after --share-warmup unmeasured
// 1-consumer reads per system.
//
// 2. Join. A round: a fresh share group (start offsets 0); start member A
// and poll it until it returns a record ("first": a new group's first
// member, client made to first record); then, A no longer polling (it
// keeps heartbeating and holds the records of its one fetch: it is made
// with kgo.MaxConcurrentFetches(0), which fetches only in a poll, so that
// it does not lock the 2000 records a share partition has in flight at
// most, group.share.partition.max.record.locks), make member B and time
// until ShareGroupDescribe shows both members with a non-empty
// assignment ("assigned") and until B's first poll returns a record
// ("record"). --share-join-rounds rounds per system, alternating, after
// one unmeasured round each. Heartbeats are each broker's
// group.share.heartbeat.interval.ms (5 s on both; kgo sleeps at least 1 s
// between share heartbeats).

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/settings"
)

// shareTopic is the topic the share consumers read.
const shareTopic = "sbench"

// shareProtocols is both systems' group.coordinator.rebalance.protocols
// under --share.
const shareProtocols = "classic,consumer,share"

// produceBatchBytes is the producer's largest batch, the Java
// producer's batch.size default: share partitions acquire whole batches,
// and the 1 MB of kgo's default would be thousands of records a batch.
const produceBatchBytes = 16384

// lateWindow is how long the consumers of a read poll on after its last
// new record, to catch records delivered twice at the end.
const lateWindow = time.Second

// shareFlags registers the --share flags; consumers is the raw
// --share-consumers list, which checkShareFlags parses.
func shareFlags(fs *flag.FlagSet, o *options, consumers *string) {
	fs.BoolVar(&o.share, "share", false, "also measure share consumers (KIP-932): throughput and a second member's join (see share.go)")
	fs.IntVar(&o.shareRecords, "share-records", 200000, "records of the share topic (each read reads them all)")
	fs.IntVar(&o.shareRecordBytes, "share-record-bytes", 100, "value bytes of each record (>= 8: a record's value starts with its index)")
	fs.IntVar(&o.sharePartitions, "share-partitions", 6, "partitions of the share topic (replication factor 3)")
	fs.StringVar(consumers, "share-consumers", "1,3", "comma list of share consumers per read (one cell each)")
	fs.IntVar(&o.shareRounds, "share-rounds", 2, "measured reads per cell and system, the systems alternating; 0 skips the reads")
	fs.IntVar(&o.shareHeartbeatMS, "share-heartbeat-ms", 0, "if > 0, both systems' group.share.heartbeat.interval.ms (and Kafka's group.share.min.heartbeat.interval.ms); 0 keeps the default, 5000")
	fs.IntVar(&o.shareWarmup, "share-warmup", 1, "unmeasured 1-consumer reads per system first")
	fs.IntVar(&o.shareJoinRounds, "share-join-rounds", 5, "join rounds per system (after one unmeasured each); 0 skips them")
	fs.DurationVar(&o.shareTimeout, "share-timeout", 3*time.Minute, "a read or a join phase not done after this long fails")
}

// checkShareFlags parses and checks the --share flags.
func checkShareFlags(o *options, consumers string) error {
	o.shareConsumers = nil
	for _, s := range settings.Items(consumers) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("--share-consumers: %q is not an integer >= 1", s)
		}
		o.shareConsumers = append(o.shareConsumers, n)
	}
	switch {
	case !o.share:
		return nil
	case len(o.shareConsumers) == 0:
		return errors.New("--share-consumers must not be empty")
	case o.shareRecords < 1 || o.sharePartitions < 1 || o.shareRecordBytes < 8:
		return errors.New("--share-records, --share-partitions: want >= 1; --share-record-bytes: want >= 8")
	case o.shareRounds < 0 || o.shareWarmup < 0 || o.shareJoinRounds < 0 || o.shareHeartbeatMS < 0 || o.shareTimeout <= 0:
		return errors.New("--share-rounds, --share-warmup, --share-join-rounds, --share-heartbeat-ms: want >= 0; --share-timeout: want > 0")
	}
	return nil
}

// shareKey names one throughput cell.
type shareKey struct {
	system    string
	consumers int
}

// shareReport is what the share measurement adds to the report.
type shareReport struct {
	setup map[string]*shareSetup // by system
	reads map[shareKey][]shareRead
	joins map[string][]shareJoin // by system
}

func newShareReport() *shareReport {
	return &shareReport{setup: map[string]*shareSetup{}, reads: map[shareKey][]shareRead{}, joins: map[string][]shareJoin{}}
}

// shareSetup is one system's share topic and what it showed of share
// groups.
type shareSetup struct {
	apis        string        // the share APIs' versions ApiVersions listed
	feature     string        // the finalized share.version, as listed
	produceTook time.Duration // producing the records, acks=all
	ends        []int64       // each partition's end offset after
	start       string        // how the last read set its start offsets
	// perPartition is how many records each partition holds, and
	// expected its end offset.
	perPartition []int
}

// shareRead is one read of every record by a fresh share group.
type shareRead struct {
	consumers      int
	order          string // the systems' order in its round, "kmirror,kafka"
	distinct       int    // records read at least once
	dups, late     int    // second deliveries before the last new record, and in the window after
	corrupt        int    // values that do not hold their own index
	unexpected     int    // offsets past what was produced
	maxDelivery    int32  // highest delivery count seen
	toFirst, total time.Duration
	perMember      []int // records each consumer returned
	errs           map[string]int
	cpu            cpuUse
	complete       bool
}

// rate is records/s over the whole read (from the first client made), and
// over the time after the first record.
func (r shareRead) rate(records int) (whole, afterFirst float64) {
	if !r.complete || r.total <= 0 {
		return 0, 0
	}
	whole = float64(records) / r.total.Seconds()
	if d := r.total - r.toFirst; d > 0 {
		afterFirst = float64(records) / d.Seconds()
	}
	return whole, afterFirst
}

// shareJoin is one join round.
type shareJoin struct {
	first, assigned, record time.Duration
	aParts, bParts          int // partitions A and B held when both were assigned
}

// runShare sets up every target, runs the warm-up and measured reads,
// then the join rounds.
func runShare(ctx context.Context, o options, targets []*target, rep *report, log *slog.Logger) error {
	sr := rep.share
	for _, t := range targets {
		began := time.Now()
		s, err := shareSetupOf(ctx, t, o)
		if s != nil {
			sr.setup[t.name] = s
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		log.Info("share topic ready", "system", t.name, "took", time.Since(began).Round(time.Millisecond),
			"apis", s.apis, "feature", s.feature, "produce_took", s.produceTook.Round(time.Millisecond))
	}
	others := pidsOf(targets)
	n := 0
	group := func() string { n++; return fmt.Sprintf("sbench-read-%d", n) }
	for _, t := range targets {
		for w := range o.shareWarmup * min(1, o.shareRounds) {
			r, err := shareReadOnce(ctx, t, group(), 1, o, sr.setup[t.name], others)
			if err != nil {
				return fmt.Errorf("%s warm-up read: %w", t.name, err)
			}
			whole, _ := r.rate(o.shareRecords)
			log.Info("share warm-up read", "system", t.name, "n", w+1, "records_per_s", int(whole), "dups", r.dups)
		}
	}
	for round := range o.shareRounds {
		order := rotate(targets, round)
		var names []string
		for _, t := range order {
			names = append(names, t.name)
		}
		for _, c := range o.shareConsumers {
			for _, t := range order {
				r, err := shareReadOnce(ctx, t, group(), c, o, sr.setup[t.name], others)
				r.order = strings.Join(names, ",")
				sr.reads[shareKey{t.name, c}] = append(sr.reads[shareKey{t.name, c}], r)
				if err != nil {
					return fmt.Errorf("%s, %d consumers, round %d: %w", t.name, c, round+1, err)
				}
				whole, after := r.rate(o.shareRecords)
				log.Info("share read", "system", t.name, "consumers", c, "round", round+1, "records_per_s", int(whole),
					"after_first_per_s", int(after), "to_first_ms", ms(r.toFirst), "dups", r.dups, "late", r.late,
					"per_member", fmt.Sprint(r.perMember))
			}
		}
	}
	if o.shareJoinRounds == 0 {
		return nil
	}
	for _, t := range targets {
		if _, err := shareJoinRound(ctx, t, "warm", o); err != nil {
			return fmt.Errorf("%s warm-up join round: %w", t.name, err)
		}
	}
	for round := range o.shareJoinRounds {
		for _, t := range rotate(targets, round) {
			j, err := shareJoinRound(ctx, t, fmt.Sprintf("r%d", round), o)
			if err != nil {
				return fmt.Errorf("%s join round %d: %w", t.name, round+1, err)
			}
			sr.joins[t.name] = append(sr.joins[t.name], j)
			log.Info("share join round", "system", t.name, "round", round+1, "first_ms", ms(j.first),
				"assigned_ms", ms(j.assigned), "record_ms", ms(j.record), "a_parts", j.aParts, "b_parts", j.bParts)
		}
	}
	return nil
}

// shareSetupOf checks that t serves share groups, creates the share
// topic and produces its records.
func shareSetupOf(ctx context.Context, t *target, o options) (*shareSetup, error) {
	cl, err := newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(produceBatchBytes))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	s := &shareSetup{}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(rctx, cl)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	listed := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range av.ApiKeys {
		listed[k.ApiKey] = k
	}
	var apis []string
	for _, k := range []int16{76, 77, 78, 79, 90, 91} {
		if v, ok := listed[k]; ok {
			apis = append(apis, fmt.Sprintf("%s v%d-%d", kmsg.NameForKey(k), v.MinVersion, v.MaxVersion))
		}
	}
	s.apis = strings.Join(apis, ", ")
	s.feature = "share.version not finalized"
	for _, f := range av.FinalizedFeatures {
		if f.Name == "share.version" {
			s.feature = fmt.Sprintf("share.version finalized at %d", f.MaxVersionLevel)
		}
	}
	if _, ok := listed[76]; !ok {
		return s, fmt.Errorf("share groups are off: ApiVersions lists no ShareGroupHeartbeat (%s)", s.feature)
	}
	if _, ok := listed[78]; !ok {
		return s, fmt.Errorf("share groups are off: ApiVersions lists no ShareFetch (%s)", s.feature)
	}

	adm := kadm.NewClient(cl)
	rctx, cancel = context.WithTimeout(ctx, requestTimeout)
	resp, err := adm.CreateTopic(rctx, int32(o.sharePartitions), 3, nil, shareTopic)
	cancel()
	if err != nil {
		return s, fmt.Errorf("creating %s: %w (%s)", shareTopic, err, resp.ErrMessage)
	}
	if _, err := waitReplicated(ctx, adm, shareTopic, 2*time.Minute); err != nil {
		return s, err
	}
	s.perPartition = make([]int, o.sharePartitions)
	for i := range o.shareRecords {
		s.perPartition[i%o.sharePartitions]++
	}
	began := time.Now()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for i := range o.shareRecords {
		v := make([]byte, o.shareRecordBytes)
		binary.BigEndian.PutUint64(v, uint64(i))
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: shareTopic, Partition: int32(i % o.sharePartitions), Value: v}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s.produceTook = time.Since(began)
	if firstErr != nil {
		return s, fmt.Errorf("producing %s: %w", shareTopic, firstErr)
	}
	rctx, cancel = context.WithTimeout(ctx, requestTimeout)
	ends, err := adm.ListEndOffsets(rctx, shareTopic)
	cancel()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return s, fmt.Errorf("ListEndOffsets %s: %w", shareTopic, err)
	}
	for p := range o.sharePartitions {
		e, _ := ends.Lookup(shareTopic, int32(p))
		s.ends = append(s.ends, e.Offset)
		if e.Offset != int64(s.perPartition[p]) {
			return s, fmt.Errorf("%s partition %d ends at %d after producing %d records to it", shareTopic, p, e.Offset, s.perPartition[p])
		}
	}
	return s, nil
}

// setShareStart gives group start offsets of 0 on every partition of the
// share topic: AlterShareGroupOffsets, else (where that fails)
// share.auto.offset.reset=earliest as a GROUP config, waited for until
// DescribeConfigs shows it. It returns how.
func setShareStart(ctx context.Context, cl *kgo.Client, group string, partitions int) (string, error) {
	adm := kadm.NewClient(cl)
	var offs kadm.Offsets
	for p := range partitions {
		offs.Add(kadm.Offset{Topic: shareTopic, Partition: int32(p), At: 0, LeaderEpoch: -1})
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	resp, err := adm.AlterShareGroupOffsets(rctx, group, offs)
	cancel()
	if err == nil {
		err = resp.Error()
	}
	if err == nil {
		return "AlterShareGroupOffsets to 0", nil
	}
	how := fmt.Sprintf("share.auto.offset.reset=earliest (GROUP config; AlterShareGroupOffsets failed: %v)", err)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "share.auto.offset.reset", 0, kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	rctx, cancel = context.WithTimeout(ctx, requestTimeout)
	iresp, err := req.RequestWith(rctx, cl)
	cancel()
	if err == nil && len(iresp.Resources) == 1 {
		err = kerr.ErrorForCode(iresp.Resources[0].ErrorCode)
	}
	if err != nil {
		return how, fmt.Errorf("%s; IncrementalAlterConfigs: %w", how, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		dreq := kmsg.NewPtrDescribeConfigsRequest()
		dres := kmsg.NewDescribeConfigsRequestResource()
		dres.ResourceType, dres.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		dres.ConfigNames = []string{"share.auto.offset.reset"}
		dreq.Resources = append(dreq.Resources, dres)
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		dresp, err := dreq.RequestWith(rctx, cl)
		cancel()
		if err == nil {
			for _, r := range dresp.Resources {
				for _, c := range r.Configs {
					if c.Name == "share.auto.offset.reset" && c.Value != nil && *c.Value == "earliest" {
						return how, nil
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return how, fmt.Errorf("%s: not shown by DescribeConfigs after 30 s (%v)", how, err)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return how, err
		}
	}
}

// newShareConsumer is one kgo share consumer of group on the share topic.
func newShareConsumer(t *target, group string, opts ...kgo.Opt) (*kgo.Client, error) {
	return newClient(t, append([]kgo.Opt{kgo.ShareGroup(group), kgo.ConsumeTopics(shareTopic)}, opts...)...)
}

// readCounter counts a read's records by (partition, offset).
type readCounter struct {
	mu       sync.Mutex
	seen     [][]bool
	parts    int
	want     int
	r        *shareRead
	start    time.Time
	done     chan struct{} // closed at the last new record
	finished bool
}

// add counts the records one poll of member m returned.
func (c *readCounter) add(m int, rs []*kgo.Record) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.r
	r.perMember[m] += len(rs)
	if r.toFirst == 0 && len(rs) > 0 {
		r.toFirst = now.Sub(c.start)
	}
	for _, rec := range rs {
		r.maxDelivery = max(r.maxDelivery, rec.DeliveryCount())
		p, off := int(rec.Partition), rec.Offset
		if p < 0 || p >= c.parts || off < 0 || off >= int64(len(c.seen[p])) {
			r.unexpected++
			continue
		}
		if len(rec.Value) < 8 || binary.BigEndian.Uint64(rec.Value) != uint64(off)*uint64(c.parts)+uint64(p) {
			r.corrupt++
		}
		switch {
		case !c.seen[p][off]:
			c.seen[p][off] = true
			r.distinct++
		case c.finished:
			r.late++
		default:
			r.dups++
		}
	}
	if !c.finished && r.distinct == c.want {
		c.finished = true
		r.total = now.Sub(c.start)
		close(c.done)
	}
}

func (c *readCounter) addErr(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r.errs == nil {
		c.r.errs = map[string]int{}
	}
	c.r.errs[kind]++
}

// shareReadOnce runs one read of every record with a fresh share group
// of consumers members. An incomplete read (timed out) is returned with
// an error, counted as far as it got.
func shareReadOnce(ctx context.Context, t *target, group string, consumers int, o options, s *shareSetup,
	others func() []int) (shareRead, error) {
	r := shareRead{consumers: consumers, perMember: make([]int, consumers)}
	adm, err := newClient(t)
	if err != nil {
		return r, err
	}
	defer adm.Close()
	how, err := setShareStart(ctx, adm, group, o.sharePartitions)
	s.start = how
	if err != nil {
		return r, err
	}
	c := &readCounter{parts: o.sharePartitions, want: o.shareRecords, r: &r, done: make(chan struct{})}
	for _, n := range s.perPartition {
		c.seen = append(c.seen, make([]bool, n))
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		cls []*kgo.Client
		wg  sync.WaitGroup
	)
	defer func() {
		stop()
		wg.Wait()
		var cw sync.WaitGroup
		for _, cl := range cls {
			cw.Go(cl.Close)
		}
		cw.Wait()
	}()
	before := snapshot(t.pids(), others)
	c.start = time.Now()
	for m := range consumers {
		cl, err := newShareConsumer(t, group)
		if err != nil {
			return r, err
		}
		cls = append(cls, cl)
		wg.Go(func() {
			for pctx.Err() == nil {
				fs := cl.PollFetches(pctx)
				fs.EachError(func(_ string, _ int32, err error) {
					if !errors.Is(err, context.Canceled) {
						c.addErr(errorKind(err))
					}
				})
				if rs := fs.Records(); len(rs) > 0 {
					c.add(m, rs)
				}
			}
		})
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		stop()
		wg.Wait()
		return r, ctx.Err()
	case <-time.After(o.shareTimeout):
	}
	r.cpu = snapshot(t.pids(), others).since(before)
	c.mu.Lock()
	r.complete = c.finished
	c.mu.Unlock()
	if !r.complete {
		stop()
		wg.Wait()
		return r, fmt.Errorf("share group %s: %d of %d records read after %v (%d duplicates, %d unexpected, per member %v, errors %v)",
			group, r.distinct, o.shareRecords, o.shareTimeout, r.dups, r.unexpected, r.perMember, r.errs)
	}
	if err := sleep(ctx, lateWindow); err != nil {
		return r, err
	}
	stop()
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.dups > 0 || r.late > 0 || r.corrupt > 0 || r.unexpected > 0 {
		return r, fmt.Errorf("share group %s: %d duplicates, %d late duplicates, %d corrupt, %d unexpected records (max delivery count %d)",
			group, r.dups, r.late, r.corrupt, r.unexpected, r.maxDelivery)
	}
	return r, nil
}

// pollFirst polls cl until it returns a record, and reports when.
func pollFirst(ctx context.Context, cl *kgo.Client) (time.Time, error) {
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return time.Time{}, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil {
				ferr = err
			}
		})
		if fs.NumRecords() > 0 {
			return time.Now(), nil
		}
		if ferr != nil && !kerr.IsRetriable(ferr) {
			return time.Time{}, ferr
		}
	}
}

// shareJoinRound is one join round on t (see the top of the file).
func shareJoinRound(ctx context.Context, t *target, tag string, o options) (shareJoin, error) {
	var j shareJoin
	group := "sbench-join-" + tag
	adm, err := newClient(t)
	if err != nil {
		return j, err
	}
	defer adm.Close()
	if _, err := setShareStart(ctx, adm, group, o.sharePartitions); err != nil {
		return j, err
	}
	rctx, cancel := context.WithTimeout(ctx, o.shareTimeout)
	defer cancel()
	var cls []*kgo.Client
	defer func() {
		var cw sync.WaitGroup
		for _, cl := range cls {
			cw.Go(cl.Close)
		}
		cw.Wait()
	}()
	start := time.Now()
	a, err := newShareConsumer(t, group, kgo.MaxConcurrentFetches(0))
	if err != nil {
		return j, err
	}
	cls = append(cls, a)
	at, err := pollFirst(rctx, a)
	if err != nil {
		return j, fmt.Errorf("member A's first record: %w", err)
	}
	j.first = at.Sub(start)

	start = time.Now()
	b, err := newShareConsumer(t, group)
	if err != nil {
		return j, err
	}
	cls = append(cls, b)
	type result struct {
		at  time.Time
		err error
	}
	bFirst := make(chan result, 1)
	go func() {
		at, err := pollFirst(rctx, b)
		bFirst <- result{at, err}
	}()
	kadmCl := kadm.NewClient(adm)
	for {
		dctx, dcancel := context.WithTimeout(rctx, 5*time.Second)
		ds, err := kadmCl.DescribeShareGroups(dctx, group)
		dcancel()
		if err == nil {
			err = ds.Error()
		}
		if err == nil {
			g := ds[group]
			var held []int
			for _, m := range g.Members {
				if n := len(m.Assignment[shareTopic]); n > 0 {
					held = append(held, n)
				}
			}
			if len(held) == 2 {
				j.assigned = time.Since(start)
				// Members are sorted by id, not by age: A's is the one
				// whose partitions it already read (either, for counts).
				j.aParts, j.bParts = held[0], held[1]
				break
			}
		}
		if rctx.Err() != nil {
			return j, fmt.Errorf("both members assigned: not after %v (last describe: %v)", o.shareTimeout, err)
		}
		if err := sleep(rctx, 10*time.Millisecond); err != nil {
			return j, fmt.Errorf("both members assigned: %w", err)
		}
	}
	res := <-bFirst
	if res.err != nil {
		return j, fmt.Errorf("member B's first record: %w", res.err)
	}
	j.record = res.at.Sub(start)
	return j, nil
}
