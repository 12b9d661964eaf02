package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/perf/internal/benchrun"
)

// The metadata writes, each one metadata record batch on the controller:
// a topic config change (a ConfigRecord in Kafka, one replicated record
// in kmirror) and a 1-partition topic (TopicRecord and PartitionRecord).
const (
	opAlter  = "IncrementalAlterConfigs"
	opCreate = "CreateTopics"
)

// Where a write is sent: a node that is not the controller (it forwards
// the request to the controller in an Envelope) or the controller's own
// client listener.
const (
	toFollower   = "non-controller"
	toController = "controller"
)

// alterTopic is the topic whose retention.ms every IncrementalAlterConfigs
// changes.
const alterTopic = "cbench-configs"

// conn is one client connection to one node: requests go to the node
// itself (its seed broker), never routed by the client to the controller
// it names, and are never retried.
type conn struct {
	cl *kgo.Client
}

func dial(addr string) (*conn, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("cluster-bench"), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	return &conn{cl}, nil
}

func (c *conn) close() { c.cl.Close() }

func (c *conn) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.cl.SeedBrokers()[0].Request(ctx, req)
}

// createTopic creates a 1-partition topic of replication factor 1 (kmirror
// has no other; the metadata records are as many for any factor).
func (c *conn) createTopic(ctx context.Context, topic string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, t)
	resp, err := c.request(ctx, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.CreateTopicsResponse)
	if len(r.Topics) != 1 {
		return fmt.Errorf("CreateTopics %s: %d topics answered", topic, len(r.Topics))
	}
	if err := kerr.ErrorForCode(r.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("CreateTopics %s: %w", topic, err)
	}
	return nil
}

// alterRetention sets alterTopic's retention.ms to ms.
func (c *conn) alterRetention(ctx context.Context, ms int64) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, alterTopic
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(strconv.FormatInt(ms, 10))
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := c.request(ctx, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.IncrementalAlterConfigsResponse)
	if len(r.Resources) != 1 {
		return fmt.Errorf("IncrementalAlterConfigs: %d resources answered", len(r.Resources))
	}
	if err := kerr.ErrorForCode(r.Resources[0].ErrorCode); err != nil {
		return fmt.Errorf("IncrementalAlterConfigs: %w", err)
	}
	return nil
}

// controllerOf asks node addr for the metadata quorum's leader, the
// controller: DescribeQuorum, which a Kafka broker forwards to the
// controller and a kmirror node answers from its own member of the log.
func controllerOf(ctx context.Context, addr string) (int32, error) {
	c, err := dial(addr)
	if err != nil {
		return -1, err
	}
	defer c.close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.request(rctx, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return -1, fmt.Errorf("DescribeQuorum: %w", err)
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return -1, errors.New("DescribeQuorum: no __cluster_metadata partition answered")
	}
	sp := r.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		return -1, fmt.Errorf("DescribeQuorum: %w", err)
	}
	if sp.LeaderID < 0 {
		return -1, errors.New("DescribeQuorum: no leader")
	}
	return sp.LeaderID, nil
}

// healthy waits, up to d, until every running node of c names the same
// controller, lists every broker in Metadata, and takes a CreateTopics
// (forwarded from all but the controller). It returns the controller.
func healthy(ctx context.Context, c cluster, tag string, d time.Duration) (int32, error) {
	deadline := time.Now().Add(d)
	var last error
	for i := 0; ; i++ {
		ctl, err := checkHealthy(ctx, c, fmt.Sprintf("cbench-health-%s-%d", tag, i))
		if err == nil {
			return ctl, nil
		}
		last = err
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("%s: the cluster was not whole within %v: %w", c.Name(), d, last)
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func checkHealthy(ctx context.Context, c cluster, topic string) (int32, error) {
	ctl := int32(-1)
	for _, id := range c.IDs() {
		got, err := controllerOf(ctx, c.Addr(id))
		if err != nil {
			return -1, fmt.Errorf("node %d: %w", id, err)
		}
		if ctl >= 0 && got != ctl {
			return -1, fmt.Errorf("node %d names controller %d, another node %d", id, got, ctl)
		}
		ctl = got
	}
	for _, id := range c.IDs() {
		cn, err := dial(c.Addr(id))
		if err != nil {
			return -1, err
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		md := kmsg.NewPtrMetadataRequest()
		md.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := cn.request(rctx, md)
		if err == nil {
			if n := len(resp.(*kmsg.MetadataResponse).Brokers); n != len(c.IDs()) {
				err = fmt.Errorf("node %d lists %d brokers", id, n)
			}
		}
		if err == nil {
			err = cn.createTopic(rctx, topic+"-via-"+strconv.Itoa(int(id)))
		}
		cancel()
		cn.close()
		if err != nil {
			return -1, fmt.Errorf("node %d: %w", id, err)
		}
	}
	return ctl, nil
}

// cellKey names one latency series.
type cellKey struct {
	system, op, to string
}

// latencies are the client-timed durations of a cell's writes.
type latencies []time.Duration

// writer sends one metadata write (op) on conns for one system, naming
// topics uniquely and counting retention.ms values up.
type writer struct {
	system string
	seq    int64
}

// write sends the i-th write of op on c and returns its duration.
func (w *writer) write(ctx context.Context, c *conn, op string) (time.Duration, error) {
	w.seq++
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	var err error
	switch op {
	case opAlter:
		err = c.alterRetention(rctx, 86_400_000+w.seq)
	case opCreate:
		err = c.createTopic(rctx, fmt.Sprintf("cbench-%d", w.seq))
	default:
		panic("BUG: unknown op " + op)
	}
	return time.Since(start), err
}

// failover is one kill of the controller and the wait for the next
// CreateTopics that succeeds.
type failover struct {
	system string
	round  int
	// patient: the client of the brief, sending one CreateTopics at a
	// time, each given patientTimeout (the default request.timeout.ms),
	// the next retryEvery after one fails; else the probe, a new attempt
	// every retryEvery whether or not the others are answered.
	patient  bool
	killed   int32 // the controller killed
	survivor int32 // the node the CreateTopics were sent to
	next     int32 // the controller after (-1: not learned)
	// took is from just before the SIGKILL to the first successful
	// answer; sentAt is when that attempt was sent (the rest it waited
	// inside the survivor, whose forward waited for a controller).
	took, sentAt time.Duration
	attempts     int
	errs         map[string]int // failed attempts by error
}

// patientTimeout bounds each request of the patient client, as the
// client default request.timeout.ms (30 s) bounds a request.
const patientTimeout = 30 * time.Second

// attempt is the outcome of one CreateTopics of a failover.
type attempt struct {
	sent, answer time.Duration
	err          error
}

// killController kills c's controller ctl and sends CreateTopics to the
// lowest-id survivor until one succeeds, each attempt on a new connection
// (a connection's requests are served in order: one left waiting inside
// the node would hold up the next). With patient, one at a time, bounded
// by patientTimeout, the next retryEvery after a failure. Else (the
// probe) a new attempt starts every retryEvery, bounded by
// attemptTimeout, with at most maxInFlight unanswered: the attempts it
// gives up on still run inside the survivor (a Kafka broker forwards
// them in order, one at a time), so maxInFlight must stay well below what
// the survivor forwards in attemptTimeout, or the attempts only ever queue
// behind the abandoned ones.
func killController(ctx context.Context, c cluster, ctl int32, round int, patient bool, retryEvery, attemptTimeout time.Duration,
	maxInFlight int, maxWait time.Duration) (failover, error) {
	f := failover{system: c.Name(), round: round, patient: patient, killed: ctl, next: -1, errs: map[string]int{}}
	for _, id := range c.IDs() {
		if id != ctl {
			f.survivor = id
			break
		}
	}
	addr := c.Addr(f.survivor)
	actx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	results := make(chan attempt, maxInFlight+1)
	inFlight := 0
	var start time.Time
	send := func(seq int, timeout time.Duration) {
		a := attempt{sent: time.Since(start)}
		cn, err := dial(addr)
		if err == nil {
			tctx, cancel := context.WithTimeout(actx, timeout)
			err = cn.createTopic(tctx, fmt.Sprintf("cbench-failover-%s-r%d-%v-%d", c.Name(), round, patient, seq))
			cancel()
			cn.close()
		}
		a.answer, a.err = time.Since(start), err
		results <- a
	}
	start = time.Now()
	if err := c.Kill(ctl); err != nil {
		return f, err
	}
	timeout, every := attemptTimeout, retryEvery
	if patient {
		timeout, every = patientTimeout, patientTimeout+time.Minute
	}
	tick := time.NewTicker(max(every, time.Millisecond))
	defer tick.Stop()
	inFlight, f.attempts = 1, 1
	go send(0, timeout)
	for seq := 1; ; {
		select {
		case <-ctx.Done():
			return f, ctx.Err()
		case a := <-results:
			inFlight--
			if a.err == nil {
				f.took, f.sentAt = a.answer, a.sent
				goto done
			}
			f.errs[errorKind(a.err)]++
			if patient {
				if time.Since(start) > maxWait {
					return f, fmt.Errorf("%s: no CreateTopics succeeded within %v of killing node %d (errors %v)", c.Name(), maxWait, ctl, f.errs)
				}
				select {
				case <-ctx.Done():
					return f, ctx.Err()
				case <-time.After(retryEvery):
				}
				inFlight++
				f.attempts++
				go send(seq, timeout)
				seq++
			}
		case <-tick.C:
			if time.Since(start) > maxWait {
				return f, fmt.Errorf("%s: no CreateTopics succeeded within %v of killing node %d (errors %v)", c.Name(), maxWait, ctl, f.errs)
			}
			if inFlight < maxInFlight {
				inFlight++
				f.attempts++
				go send(seq, timeout)
				seq++
			}
		}
	}
done:
	cancelAll()
	// A Kafka broker forwards DescribeQuorum, behind the abandoned
	// attempts it still holds: ask for a few seconds.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if next, err := controllerOf(ctx, addr); err == nil {
			f.next = next
			break
		}
		select {
		case <-ctx.Done():
			return f, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return f, nil
}

// errorKind is a short, bounded name of a failed attempt's error.
func errorKind(err error) string {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, context.DeadlineExceeded):
		return "attempt timed out"
	default:
		return "connection: " + benchrun.Tail(err.Error(), 60)
	}
}

// median of ds (which it sorts).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	if len(ds)%2 == 1 {
		return ds[len(ds)/2]
	}
	return (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
}
