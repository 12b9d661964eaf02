package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/node"
)

// `kmirror demo --cluster` (`make demo-cluster`): a source node and a
// destination cluster of three nodes on loopback, in this process. The
// mirror runs each partition's fetcher on its leader; the node leading
// the most partitions is stopped mid-mirroring, the others take its
// partitions over and mirror on; the copy is checked byte for byte
// against the source; the failover runs with that node still down, a
// consumer group committed at the source resumes on the cluster, and
// transactions run on the cluster (one aborted, one committed).

const demoGroup = "demo-consumers"

// startDemoCluster starts three voters of one cluster at once (each waits
// for a majority), their CONTROLLER listeners on loopback ports picked
// free just before (a demo: another process could take one first).
func startDemoCluster(dir string, log *slog.Logger) ([]*demoNode, error) {
	voters := make([]meta.Voter, 3)
	for i := range voters {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		voters[i] = meta.Voter{ID: int32(i + 1), Addr: ln.Addr().String()}
		ln.Close()
	}
	nodes := make([]*demoNode, len(voters))
	errs := make([]error, len(voters))
	var wg sync.WaitGroup
	for i, v := range voters {
		_, port, _ := net.SplitHostPort(v.Addr)
		p, _ := strconv.Atoi(port)
		cfg := broker.DefaultConfig()
		cfg.NodeID = v.ID
		cfg.Listeners = []broker.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
		cfg.LogDirs = []string{fmt.Sprintf("%s/c%d", dir, v.ID)}
		cfg.MetricsListener = ""
		cfg.GroupInitialRebalanceDelay = 0
		cfg.DefaultReplicationFactor = 3
		cfg.Cluster = broker.ClusterConfig{Voters: voters,
			ControllerListener: &broker.Listener{Name: "CONTROLLER", Host: "127.0.0.1", Port: p, Protocol: "PLAINTEXT"},
			SessionTimeout:     3 * time.Second, HeartbeatInterval: 300 * time.Millisecond}
		cfg.Logger = log.With("node", fmt.Sprint("C", v.ID))
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := node.Start(cfg, control.Config{})
			if err != nil {
				errs[i] = fmt.Errorf("node C%d: %w", v.ID, err)
				return
			}
			// A failover with a node down may take longer than kgo's
			// default 10 s read timeout to answer (up to 25 s).
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)),
				kgo.RequestTimeoutOverhead(30*time.Second))
			if err != nil {
				n.Close()
				errs[i] = err
				return
			}
			nodes[i] = &demoNode{Node: n, name: fmt.Sprint("C", v.ID), cl: cl}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, n := range nodes {
			if n != nil {
				n.close()
			}
		}
		return nil, err
	}
	return nodes, nil
}

func demoCluster(ctx context.Context, records int, out io.Writer, log *slog.Logger) error {
	start := time.Now()
	dir, err := os.MkdirTemp("", "kmirror-demo-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src, err := startDemoNode("S", dir+"/s", log)
	if err != nil {
		return fmt.Errorf("starting the source node: %w", err)
	}
	defer src.close()
	nodes, err := startDemoCluster(dir, log)
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.close()
			}
		}
	}()
	rep := &demoReport{out: out, start: start, width: 58}
	step := rep.step
	fmt.Fprintf(out, "source node S %s; cluster C1 %s, C2 %s, C3 %s\n\n", src.Addr(), nodes[0].Addr(), nodes[1].Addr(), nodes[2].Addr())

	// 1. The source: data, and a consumer group part way through it.
	if _, err := kadm.NewClient(src.cl).CreateTopic(ctx, 3, 1, nil, demoTopic); err != nil {
		return fmt.Errorf("creating %s on S: %w", demoTopic, err)
	}
	if err := produceDemo(ctx, src.Addr(), records, "s"); err != nil {
		return err
	}
	committed, err := commitDemoGroup(ctx, src, records/2)
	if err != nil {
		return err
	}
	step("produce lz4 records on S; group "+demoGroup+" commits", fmt.Sprintf("%d records, %d consumed", records, committed))

	// 2. Mirror S into the cluster, through any node.
	if err := mirrorTo(ctx, nodes[1], "dr", src.Addr()); err != nil {
		return err
	}
	if err := clusterCaughtUp(ctx, src, nodes); err != nil {
		return err
	}
	if err := fetchersOnLeaders(nodes); err != nil {
		return err
	}
	step("mirror dr: each partition's fetcher on its leader", fmt.Sprintf("leaders %v", demoLeaders(nodes)))

	// 3. A node goes down mid-mirroring; the others mirror on (and the
	// group offsets the failover syncs go to __consumer_offsets, whose
	// partitions the live nodes lead).
	gone := mostLeading(nodes)
	name := nodes[gone].name
	nodes[gone].close()
	nodes[gone] = nil
	if err := produceDemo(ctx, src.Addr(), records/2, "s2"); err != nil {
		return err
	}
	step("stop "+name+" (it led the most partitions); produce on S", fmt.Sprintf("%d more records", records/2))
	if err := clusterCaughtUp(ctx, src, nodes); err != nil {
		return err
	}
	step("the new leaders mirrored on; bytes identical to S", fmt.Sprintf("leaders %v", demoLeaders(nodes)))

	// 4. Failover with the node still down.
	alive := nodes[(gone+1)%3]
	synced, err := stopDemoTopic(ctx, alive.cl, "dr")
	if err != nil {
		return err
	}
	step("failover with "+name+" down: every partition STOPPED", synced)
	resumed, err := resumeDemoGroup(ctx, alive, committed)
	if err != nil {
		return err
	}
	step("group "+demoGroup+" resumes on the cluster", resumed)
	if err := produceDemo(ctx, alive.Addr(), 100, "c"); err != nil {
		return fmt.Errorf("producing on the cluster after the failover: %w", err)
	}
	step("produce on the cluster (writable)", "ok")

	// 5. Transactions on the cluster, the node still down: the
	// coordinator writes the markers at each partition's leader; a
	// read_committed consumer sees the committed transaction only.
	txnStart, err := endOffsets(ctx, alive)
	if err != nil {
		return err
	}
	if err := produceDemoTxns(ctx, alive.Addr(), demoTxnRecords); err != nil {
		return fmt.Errorf("transactions on the cluster: %w", err)
	}
	step(fmt.Sprintf("transactions on the cluster: abort %d records, commit %d", demoTxnRecords, demoTxnRecords), "ok")
	seen, err := readDemoTxns(ctx, alive.Addr(), txnStart)
	if err != nil {
		return fmt.Errorf("reading the transactions on the cluster: %w", err)
	}
	step("read_committed on the cluster: committed records only", seen)

	rep.summary()
	return nil
}

// commitDemoGroup consumes n records of the demo topic at s as demoGroup
// and commits where it got; it returns how many records it consumed.
func commitDemoGroup(ctx context.Context, s *demoNode, n int) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.ConsumerGroup(demoGroup), kgo.ConsumeTopics(demoTopic),
		kgo.DisableAutoCommit())
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	got := 0
	for got < n {
		fs := cl.PollRecords(ctx, n-got)
		if err := fs.Err0(); err != nil {
			return got, fmt.Errorf("consuming on S: %w", err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return got, fmt.Errorf("committing on S: %w", err)
	}
	return got, nil
}

// resumeDemoGroup reads, as demoGroup on the cluster, the offsets synced
// from the source, checks that they cover the records consumed there, and
// consumes on from them: the first records it gets are the ones after.
func resumeDemoGroup(ctx context.Context, n *demoNode, consumed int) (string, error) {
	// A new client: n's has the stopped node in its metadata still, and
	// could send the coordinator lookup there.
	acl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		return "", err
	}
	defer acl.Close()
	offs, err := kadm.NewClient(acl).FetchOffsets(ctx, demoGroup)
	if err != nil {
		return "", fmt.Errorf("the group's offsets on the cluster: %w", err)
	}
	total := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != int64(consumed) {
		return "", fmt.Errorf("the group's offsets on the cluster add up to %d, it consumed %d at the source", total, consumed)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumerGroup(demoGroup), kgo.ConsumeTopics(demoTopic),
		kgo.DisableAutoCommit())
	if err != nil {
		return "", err
	}
	defer cl.Close()
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		return "", err
	}
	var wrong error
	fs.EachRecord(func(r *kgo.Record) {
		if o, ok := offs.Lookup(demoTopic, r.Partition); ok && r.Offset < o.At && wrong == nil {
			wrong = fmt.Errorf("partition %d: consumed offset %d again (committed %d)", r.Partition, r.Offset, o.At)
		}
	})
	if wrong != nil {
		return "", wrong
	}
	return fmt.Sprintf("from offset sum %d, nothing read twice", total), nil
}

// clusterCaughtUp waits until, for every partition, the cluster's leader
// holds the source's log byte for byte up to its end.
func clusterCaughtUp(ctx context.Context, src *demoNode, nodes []*demoNode) error {
	for {
		err := sameBytesAsCluster(src, nodes)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster did not catch up: %w (last: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sameBytesAsCluster compares each partition of the demo topic on src
// with its leader's copy in the cluster, the bytes from offset 0.
func sameBytesAsCluster(src *demoNode, nodes []*demoNode) error {
	st := src.Broker.Partitions().Topic(demoTopic)
	for p := int32(0); p < 3; p++ {
		want, _, err := st.Partition(p).Read(0, 64<<20, st.Partition(p).LogEndOffset(), nil)
		if err != nil {
			return err
		}
		leader := demoLeader(nodes, p)
		if leader == nil {
			return fmt.Errorf("partition %d has no running leader", p)
		}
		lp := leader.Broker.Partitions().Topic(demoTopic).Partition(p)
		got, _, err := lp.Read(0, 64<<20, lp.HighWatermark(), nil)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("partition %d: %d bytes committed on %s, the source holds %d", p, len(got), leader.name, len(want))
		}
	}
	return nil
}

// fetchersOnLeaders checks that each partition's fetcher runs on its
// leader and on no other node.
func fetchersOnLeaders(nodes []*demoNode) error {
	for p := int32(0); p < 3; p++ {
		leader := demoLeader(nodes, p)
		for _, n := range nodes {
			if n == nil {
				continue
			}
			_, err := n.Mirrors.Fetchers().Status("dr", demoTopic, p)
			if runs := err == nil; runs != (n == leader) {
				return fmt.Errorf("partition %d: its fetcher runs on %s: %v, which leads it: %v", p, n.name, runs, n == leader)
			}
		}
	}
	return nil
}

// demoLeader is the running node that leads partition p of the demo
// topic, nil when none does.
func demoLeader(nodes []*demoNode, p int32) *demoNode {
	for i, n := range nodes {
		if n == nil {
			continue
		}
		t := n.Broker.Partitions().Topic(demoTopic)
		if t == nil {
			continue
		}
		if a, ok := t.Partition(p).Assignment(); ok && a.Leader == int32(i+1) {
			return n
		}
	}
	return nil
}

// demoLeaders names each partition's leader.
func demoLeaders(nodes []*demoNode) map[int32]string {
	out := map[int32]string{}
	for p := int32(0); p < 3; p++ {
		if l := demoLeader(nodes, p); l != nil {
			out[p] = l.name
		}
	}
	return out
}

// mostLeading is the index of the node leading the most partitions.
func mostLeading(nodes []*demoNode) int {
	led := make([]int, len(nodes))
	for p := int32(0); p < 3; p++ {
		for i, n := range nodes {
			if l := demoLeader(nodes, p); l != nil && l == n {
				led[i]++
			}
		}
	}
	best := -1
	for i := range led {
		if best < 0 || led[i] > led[best] {
			best = i
		}
	}
	return best
}
