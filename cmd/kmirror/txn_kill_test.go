package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
)

// The kill -9 test of the transaction coordinator (issue 11: "a kill -9
// between prepare and markers completes or aborts the transaction on
// restart, never leaves it hanging"). There are no failpoints in the
// product, so it works by brute force and checks every outcome: a
// transactional producer commits even-numbered and aborts odd-numbered
// transactions, each writing k9PerPart records to each of k9Parts
// partitions, and the child `kmirror serve` gets SIGKILL at a random point
// (shortly after an EndTransaction is issued, later, or while a
// transaction produces). After each restart on the same directory a
// read_committed read of the whole topic must show every committed
// transaction whole, no aborted one, and each transaction whose outcome
// the client never learned either whole or absent, never in part.

const (
	k9Topic = "k9txn"
	k9Parts = 3
	// k9PerPart records per partition per transaction.
	k9PerPart = 2
	k9TxnID   = "k9-txn"
	// k9AbandonedID opens a transaction before the last kill and is never
	// used again: only the coordinator's timeout checker can end it.
	k9AbandonedID = "k9-abandoned"
	k9Rounds      = 30
	k9TxnTimeout  = 3 * time.Second
	// k9CheckInterval is txn.Config.CheckInterval's default, how often the
	// coordinator aborts timed-out transactions. kmirror serve has no
	// setting for it (Kafka's transaction.abort.timed.out.transaction.
	// cleanup.interval.ms), so an abandoned transaction ends between
	// timeout and timeout + 10 s after it started, and never sooner than
	// the first tick, 10 s after a (re)start.
	k9CheckInterval = 10 * time.Second
	// k9Settle bounds every wait that should end at once (a restart, an
	// InitProducerId, a read of the topic) on a loaded 2-core machine.
	k9Settle = 15 * time.Second
)

// txnOutcome is what the producer learned about one transaction.
type txnOutcome int8

const (
	// outNotEnded: killed before EndTransaction was issued; it can only
	// be aborted.
	outNotEnded txnOutcome = iota
	outCommitted
	outAborted
	// outUnknownCommit: EndTransaction(commit) failed (the kill): whole or
	// absent.
	outUnknownCommit
	// outUnknownAbort: EndTransaction(abort) failed: absent.
	outUnknownAbort
)

var outcomeNames = [...]string{"not-ended", "committed", "aborted", "unknown-commit", "unknown-abort"}

func (o txnOutcome) String() string { return outcomeNames[o] }

// txnEntry is the ledger line of one transaction number.
type txnEntry struct {
	outcome txnOutcome
	// visible: the first check's verdict for an unknown commit (0 not yet
	// seen, 1 visible, -1 absent); later checks must agree.
	visible int8
}

// killPlan says where a round's kill lands: delay (uniform in [0, maxDelay])
// after the round's atTxn-th transaction issued EndTransaction (onEnd) or
// started producing.
type killPlan struct {
	atTxn    int
	onEnd    bool
	maxDelay time.Duration
}

func (p killPlan) String() string {
	where := "produce"
	if p.onEnd {
		where = "EndTransaction"
	}
	return fmt.Sprintf("txn %d of the round, 0-%v after %s", p.atTxn, p.maxDelay, where)
}

// txnServe is one `kmirror serve` child process.
type txnServe struct {
	*serveProc
	addr string
}

// startTxnServe runs `kmirror serve` on dir as a child process, logging at
// info level so the test can see what the coordinator finished at start.
func startTxnServe(t *testing.T, dir string) *txnServe {
	t.Helper()
	p := launchServe(t, "--override", "listeners=PLAINTEXT://127.0.0.1:0",
		"--override", "log.dirs="+dir, "--override", "metrics.listener=", "--log-level", "info")
	return &txnServe{serveProc: p, addr: p.waitServing(t, k9Settle)}
}

// finishedAtStart returns the coordinator's "finishing a transaction
// decided before the restart" log lines (txn.New).
func (s *txnServe) finishedAtStart() []string {
	var out []string
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(line, "finishing a transaction decided before the restart") {
			out = append(out, line)
		}
	}
	return out
}

func newTxnProducer(t *testing.T, addr, id string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(id),
		kgo.TransactionTimeout(k9TxnTimeout), kgo.DefaultProduceTopic(k9Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// txnRecords are transaction n's records: "n/partition/j".
func txnRecords(n int) []*kgo.Record {
	recs := make([]*kgo.Record, 0, k9Parts*k9PerPart)
	for p := range int32(k9Parts) {
		for j := range k9PerPart {
			recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d/%d/%d", n, p, j)})
		}
	}
	return recs
}

// txnResult is one transaction the driver ran.
type txnResult struct {
	n       int
	outcome txnOutcome
	// endTook is how long a successful EndTransaction took.
	endTook time.Duration
}

// driveTxns runs transactions numbered first, first+1, ... until one
// fails (the kill). It closes trig when plan's point is reached.
func driveTxns(ctx context.Context, cl *kgo.Client, first int, plan killPlan, trig chan<- struct{}) []txnResult {
	var out []txnResult
	for i := 0; ; i++ {
		n := first + i
		commit := n%2 == 0
		res := txnResult{n: n, outcome: outNotEnded}
		if err := cl.BeginTransaction(); err != nil {
			return out // nothing was produced: not a transaction
		}
		if i == plan.atTxn && !plan.onEnd {
			close(trig)
		}
		if err := cl.ProduceSync(ctx, txnRecords(n)...).FirstErr(); err != nil {
			return append(out, res)
		}
		if i == plan.atTxn && plan.onEnd {
			close(trig)
		}
		start := time.Now()
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			res.outcome = outUnknownAbort
			if commit {
				res.outcome = outUnknownCommit
			}
			return append(out, res)
		}
		res.outcome, res.endTook = outAborted, time.Since(start)
		if commit {
			res.outcome = outCommitted
		}
		out = append(out, res)
	}
}

// reinitTxnID is a restarted application's first step: InitProducerId for
// its transactional id, which aborts a transaction a kill left open (a
// PrepareX left unfinished is CONCURRENT_TRANSACTIONS: retried until
// k9Settle); what names the caller (the round) in a failure.
func reinitTxnID(t *testing.T, ctx context.Context, cl *kgo.Client, what, id string) {
	t.Helper()
	testutil.CheckFor(t, k9Settle, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(id)
		req.TransactionTimeoutMillis = int32(k9TxnTimeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return fmt.Errorf("%s: InitProducerId for %s after the restart: %w", what, id, err)
		}
		return nil
	})
}

// settledStates polls DescribeTransactions for ids until none is in
// PrepareCommit or PrepareAbort; it returns the states and whether a
// Prepare state was seen at all.
func settledStates(ctx context.Context, adm *kadm.Client, ids ...string) (map[string]string, bool, error) {
	deadline := time.Now().Add(k9Settle)
	sawPrepare := false
	for {
		d, err := adm.DescribeTransactions(ctx, ids...)
		if err == nil {
			states, prepare := map[string]string{}, false
			for _, id := range ids {
				dt, ok := d[id]
				switch {
				case !ok:
					states[id] = "missing"
				case errors.Is(dt.Err, kerr.TransactionalIDNotFound):
					states[id] = "not found"
				case dt.Err != nil:
					states[id] = "error: " + dt.Err.Error()
				default:
					states[id] = dt.State
					prepare = prepare || strings.HasPrefix(dt.State, "Prepare")
				}
			}
			sawPrepare = sawPrepare || prepare
			if !prepare {
				return states, sawPrepare, nil
			}
			if time.Now().After(deadline) {
				return states, true, fmt.Errorf("still preparing after %v: %v", k9Settle, states)
			}
		} else if time.Now().After(deadline) {
			return nil, sawPrepare, err
		}
		select {
		case <-ctx.Done():
			return nil, sawPrepare, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// committedRecord is a record a read_committed read returned.
type committedRecord struct {
	partition int32
	offset    int64
	value     string
}

// readCommitted reads every partition of k9Topic from offset 0 with
// read_committed Fetch requests, decoded by kgo's own consumer code
// (ProcessFetchPartition, which drops aborted batches by the response's
// aborted-transaction list), until each partition's last stable offset
// equals its high watermark and the read reached it. It fails if that
// does not happen within wait: a transaction left hanging.
func readCommitted(ctx context.Context, cl *kgo.Client, topicID [16]byte, wait time.Duration) ([]committedRecord, error) {
	deadline := time.Now().Add(wait)
	offsets := make([]int64, k9Parts)
	done := make([]bool, k9Parts)
	lso, hwm := make([]int64, k9Parts), make([]int64, k9Parts)
	var out []committedRecord
	for slices.Contains(done, false) {
		if time.Now().After(deadline) {
			return out, fmt.Errorf("read_committed did not reach the log end in %v: offsets %v, last stable %v, high watermarks %v",
				wait, offsets, lso, hwm)
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 100, 1, 10<<20, -1
		req.IsolationLevel = 1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = k9Topic, topicID
		for p := range int32(k9Parts) {
			if done[p] {
				continue
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offsets[p], 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return out, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return out, err
		}
		for _, t := range resp.Topics {
			for i := range t.Partitions {
				rp := &t.Partitions[i]
				p := rp.Partition
				if p < 0 || p >= k9Parts {
					return out, fmt.Errorf("fetch answered partition %d", p)
				}
				fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: offsets[p],
					IsolationLevel: kgo.ReadCommitted(), Topic: k9Topic, Partition: p}, rp, kgo.DefaultDecompressor(), nil)
				if fp.Err != nil {
					return out, fmt.Errorf("partition %d at offset %d: %w", p, offsets[p], fp.Err)
				}
				for _, r := range fp.Records {
					out = append(out, committedRecord{partition: p, offset: r.Offset, value: string(r.Value)})
				}
				offsets[p] = max(offsets[p], next)
				lso[p], hwm[p] = rp.LastStableOffset, rp.HighWatermark
				done[p] = rp.LastStableOffset == rp.HighWatermark && offsets[p] >= rp.HighWatermark
			}
		}
	}
	return out, nil
}

// checkLedger compares a read_committed read with what the producer
// learned. It resolves unknown commits on first sight and returns the
// transactions seen whole.
func checkLedger(t *testing.T, recs []committedRecord, ledger map[int]*txnEntry) (visible int) {
	t.Helper()
	type key struct {
		n int
		p int32
		j int
	}
	seen := map[key]int64{}
	where := map[int][]string{} // txn -> "p@offset"
	for _, r := range recs {
		f := strings.Split(r.value, "/")
		if len(f) != 3 {
			t.Errorf("partition %d offset %d: unexpected value %q", r.partition, r.offset, r.value)
			continue
		}
		if f[0] == "a" {
			t.Errorf("partition %d offset %d: the abandoned transaction's record %q is visible", r.partition, r.offset, r.value)
			continue
		}
		n, err1 := strconv.Atoi(f[0])
		p, err2 := strconv.Atoi(f[1])
		j, err3 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2, err3); err != nil || int32(p) != r.partition {
			t.Errorf("partition %d offset %d: bad value %q", r.partition, r.offset, r.value)
			continue
		}
		k := key{n, int32(p), j}
		if first, dup := seen[k]; dup {
			t.Errorf("transaction %d: record %q twice, at offsets %d and %d of partition %d", n, r.value, first, r.offset, p)
			continue
		}
		seen[k] = r.offset
		where[n] = append(where[n], fmt.Sprintf("%d@%d", p, r.offset))
	}
	for n, locs := range where {
		e := ledger[n]
		if e == nil {
			t.Errorf("transaction %d was never produced but is visible at %v", n, locs)
			continue
		}
		if len(locs) != k9Parts*k9PerPart {
			t.Errorf("transaction %d (%s) PARTIALLY visible: %d of %d records, at partition@offset %v",
				n, e.outcome, len(locs), k9Parts*k9PerPart, locs)
		}
	}
	for n, e := range ledger {
		locs, vis := where[n]
		switch e.outcome {
		case outCommitted:
			if !vis {
				t.Errorf("transaction %d was committed but is not visible", n)
			}
		case outAborted, outUnknownAbort, outNotEnded:
			if vis {
				t.Errorf("transaction %d (%s) must stay invisible but is visible at %v", n, e.outcome, locs)
			}
		case outUnknownCommit:
			v := int8(-1)
			if vis {
				v = 1
			}
			if e.visible != 0 && e.visible != v {
				t.Errorf("transaction %d (unknown commit) changed visibility between restarts: now %v", n, vis)
			}
			e.visible = v
		}
		if vis {
			visible++
		}
	}
	return visible
}

// TestKill9DuringTransactions: k9Rounds kills of `kmirror serve` while a
// transactional producer commits and aborts; after each restart, no
// transaction is partially visible, every outcome the producer learned
// holds, no transaction stays in PrepareX, and read_committed reaches the
// log end (nothing hangs). The last round also leaves a transaction open
// that nobody resumes, which the coordinator's timeout checker must abort.
// Set KMIRROR_K9_SEED to replay a run's kill points.
func TestKill9DuringTransactions(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KMIRROR_K9_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("KMIRROR_K9_SEED: %v", err)
		}
	}
	t.Logf("seed %d (KMIRROR_K9_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dir := t.TempDir()
	srv := startTxnServe(t, dir)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(srv.addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, k9Parts, 1, nil, k9Topic); err != nil {
		t.Fatal(err)
	}
	admCl.Close()

	ledger := map[int]*txnEntry{}
	next, finishedCommit, finishedAbort, unknownVisible, unknownAbsent := 0, 0, 0, 0, 0
	// endTook samples successful EndTransaction latencies: most kills aim
	// at the window between the prepare record's fsync and the
	// completion's, somewhere inside one EndTransaction call.
	endTook := []time.Duration{time.Millisecond}
	for round := range k9Rounds {
		last := round == k9Rounds-1
		slices.Sort(endTook)
		plan := killPlan{atTxn: rng.IntN(6), onEnd: true, maxDelay: endTook[len(endTook)*9/10]}
		switch round % 5 {
		case 3:
			plan.maxDelay = 50 * time.Millisecond
		case 4:
			plan.onEnd, plan.maxDelay = false, 5*time.Millisecond
		}
		delay := time.Duration(rng.Int64N(int64(plan.maxDelay) + 1))

		var abandoned *kgo.Client
		if last {
			abandoned = newTxnProducer(t, srv.addr, k9AbandonedID)
			if err := abandoned.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			var recs []*kgo.Record
			for p := range int32(k9Parts) {
				recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "a/%d/0", p)})
			}
			if err := abandoned.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("the abandoned transaction: %v", err)
			}
		}

		p := newTxnProducer(t, srv.addr, k9TxnID)
		roundCtx, roundCancel := context.WithCancel(ctx)
		trig := make(chan struct{})
		results := make(chan []txnResult, 1)
		go func() { results <- driveTxns(roundCtx, p, next, plan, trig) }()
		var res []txnResult
		select {
		case <-trig:
			<-time.After(delay)
			if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			srv.cmd.Wait()
			srv.checkNoRace(t)
			// kgo retries a produce whose context is done; closing the
			// client fails the records it still buffers.
			roundCancel()
			closed := make(chan struct{})
			go func() { p.Close(); close(closed) }()
			select {
			case res = <-results:
				<-closed
			case <-time.After(k9Settle):
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("round %d: the producer did not return %v after the kill\n%s", round, k9Settle, buf)
			}
		case res = <-results:
			roundCancel()
			p.Close()
			t.Fatalf("round %d: the producer failed before the kill point (%v); its last transactions: %v\n%s",
				round, plan, res[max(0, len(res)-3):], srv.stderr.String())
		}
		if abandoned != nil {
			abandoned.Close()
		}
		for _, r := range res {
			ledger[r.n] = &txnEntry{outcome: r.outcome}
			if r.endTook > 0 {
				endTook = append(endTook, r.endTook)
			}
		}
		if len(res) == 0 {
			t.Fatalf("round %d: the producer ran no transaction", round)
		}
		next = res[len(res)-1].n + 1
		lastTxn := res[len(res)-1]

		// Restart on the same directory and check.
		srv = startTxnServe(t, dir)
		restarted := time.Now()
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.addr))
		if err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(cl)
		ids := []string{k9TxnID}
		if last {
			ids = append(ids, k9AbandonedID)
		}
		states, sawPrepare, err := settledStates(ctx, adm, ids...)
		if err != nil {
			t.Errorf("round %d: DescribeTransactions after the restart: %v", round, err)
		}
		if sawPrepare {
			t.Errorf("round %d: DescribeTransactions showed a Prepare state after the restart: txn.New should have finished it", round)
		}
		finished, finishedCommitNow := srv.finishedAtStart(), false
		for _, line := range finished {
			switch {
			case !strings.Contains(line, "transactional_id="+k9TxnID+" "):
				t.Errorf("round %d: finished a transaction of another id at start: %s", round, line)
			case strings.Contains(line, "state=PrepareCommit"):
				finishedCommit++
				finishedCommitNow = true
				if lastTxn.outcome != outUnknownCommit {
					t.Errorf("round %d: a PrepareCommit was finished at start but the last transaction %d was %s", round, lastTxn.n, lastTxn.outcome)
				}
			case strings.Contains(line, "state=PrepareAbort"):
				finishedAbort++
				if lastTxn.outcome != outUnknownAbort {
					t.Errorf("round %d: a PrepareAbort was finished at start but the last transaction %d was %s", round, lastTxn.n, lastTxn.outcome)
				}
			}
		}
		reinitTxnID(t, ctx, cl, fmt.Sprintf("round %d", round), k9TxnID)
		// Reaching the log end: at once once the id is re-initialised;
		// in the last round the abandoned transaction holds the last
		// stable offset until the checker's first tick after the restart.
		wait := k9Settle
		if last {
			wait = k9CheckInterval + k9TxnTimeout + k9Settle
		}
		topics, err := adm.ListTopics(ctx, k9Topic)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := readCommitted(ctx, cl, topics[k9Topic].ID, wait)
		if err != nil {
			desc, _ := adm.DescribeProducers(ctx, kadm.TopicsSet{k9Topic: {0: {}, 1: {}, 2: {}}})
			t.Fatalf("round %d: %v\nproducers: %+v\nserver log:\n%s", round, err, desc, srv.stderr.String())
		}
		settle := time.Since(restarted)
		visible := checkLedger(t, recs, ledger)
		if finishedCommitNow && ledger[lastTxn.n].visible != 1 {
			t.Errorf("round %d: transaction %d was finished as a commit at start but is not visible", round, lastTxn.n)
		}
		if lastTxn.outcome == outUnknownCommit {
			if ledger[lastTxn.n].visible > 0 {
				unknownVisible++
			} else {
				unknownAbsent++
			}
		}
		after, _, err := settledStates(ctx, adm, ids...)
		if err != nil || after[k9TxnID] != "Empty" {
			t.Errorf("round %d: %s after InitProducerId: %v, %v (want Empty)", round, k9TxnID, after[k9TxnID], err)
		}
		if last {
			if after[k9AbandonedID] != "CompleteAbort" {
				t.Errorf("the abandoned transaction is %q once the log end was reached, want CompleteAbort", after[k9AbandonedID])
			}
			t.Logf("abandoned transaction aborted by the timeout checker; read_committed reached the log end %v after the restart",
				settle.Round(time.Millisecond))
		}
		t.Logf("round %d: kill at %v (+%v): %d transactions ran, last %d %s; finished at start: %d; states after restart %v; "+
			"%d records read_committed, %d of %d transactions visible, log end reached in %v",
			round, plan, delay.Round(10*time.Microsecond), len(res), lastTxn.n, lastTxn.outcome, len(finished), states,
			len(recs), visible, len(ledger), settle.Round(time.Millisecond))
		cl.Close()
		if t.Failed() {
			t.FailNow()
		}
	}
	srv.checkNoRace(t)
	t.Logf("%d kills, %d transactions: %d PrepareCommit and %d PrepareAbort finished at a restart; unknown commits: %d visible, %d absent; "+
		"EndTransaction took %v (median)", k9Rounds, len(ledger), finishedCommit, finishedAbort, unknownVisible, unknownAbsent,
		endTook[len(endTook)/2])
}
