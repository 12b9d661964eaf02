package mirror

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/control"
	kmnode "github.com/kmirror/kmirror/node"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/bench"
	"github.com/kmirror/kmirror/broker"
)

// source is the cluster the modes copy from.
type source struct {
	kind      string // kmirror, kfake or external
	addrs     []string
	inProcess bool
	pid       int // the child's, 0 when none
	close     func() error
}

// startSource starts what opts ask for, or connects to an external one.
func startSource(ctx context.Context, opts Options, log *slog.Logger) (*source, error) {
	if opts.Source != "" {
		var addrs []string
		for _, a := range strings.Split(opts.Source, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		return &source{kind: "external", addrs: addrs, close: func() error { return nil }}, nil
	}
	if opts.SourceExe != "" {
		return startChildSource(ctx, opts, log)
	}
	switch opts.SourceKind {
	case SourceKfake:
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("starting kfake: %w", err)
		}
		return &source{kind: SourceKfake, addrs: c.ListenAddrs(), inProcess: true,
			close: func() error { c.Close(); return nil }}, nil
	default:
		n, err := startNode("kmirror-bench-source-*")
		if err != nil {
			return nil, fmt.Errorf("starting the kmirror source: %w", err)
		}
		return &source{kind: SourceKmirror, addrs: []string{n.b.Addr()}, inProcess: true, close: n.close}, nil
	}
}

// node is an in-process kmirror node in a temporary directory, built as
// `kmirror serve` builds one (node.Start). The mirror modes write its
// mirror topics with their own fetch.Manager, not through its control
// plane, whose store names no mirror: they measure the data path alone.
type node struct {
	n   *kmnode.Node
	b   *broker.Broker
	dir string
}

func startNode(pattern string) (*node, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return nil, err
	}
	cfg := broker.DefaultConfig()
	cfg.Listeners = []broker.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
	cfg.LogDirs = []string{dir}
	cfg.MetricsListener = ""
	n, err := kmnode.Start(cfg, control.Config{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &node{n: n, b: n.Broker, dir: dir}, nil
}

func (n *node) close() error {
	err := n.n.Close()
	return errors.Join(err, os.RemoveAll(n.dir))
}

// childServingMarker is in the line a source child prints once it listens:
// "kmirror serving on ADDR ..." (kmirror serve) or "kfake serving on ADDR"
// (ServeKfake).
const childServingMarker = " serving on "

// startChildSource runs the source as a child process of opts.SourceExe.
func startChildSource(ctx context.Context, opts Options, log *slog.Logger) (*source, error) {
	var args []string
	dir := ""
	switch opts.SourceKind {
	case SourceKfake:
		args = []string{"bench", "--kfake-source"}
	default:
		var err error
		if dir, err = os.MkdirTemp("", "kmirror-bench-source-*"); err != nil {
			return nil, err
		}
		args = []string{"serve", "--log-level", "warn",
			"--override", "listeners=PLAINTEXT://127.0.0.1:0",
			"--override", "log.dirs=" + dir,
			"--override", "metrics.listener="}
	}
	cleanDir := func() {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	cmd := exec.Command(opts.SourceExe, args...)
	cmd.Env = append(os.Environ(), opts.SourceEnv...)
	cmd.SysProcAttr = childAttr()
	stderr := &tailBuffer{max: 64 << 10}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cleanDir()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cleanDir()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cleanDir()
		return nil, fmt.Errorf("starting the %s source (%s %s): %w", opts.SourceKind, opts.SourceExe, args[0], err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := func() error {
		stdin.Close() // a kfake child exits on stdin EOF
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		cleanDir()
		var ee *exec.ExitError
		if waitErr != nil && !errors.As(waitErr, &ee) {
			return waitErr
		}
		return nil
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, childServingMarker); i >= 0 && !sent {
				if f := strings.Fields(line[i+len(childServingMarker):]); len(f) > 0 {
					addr <- f[0]
					sent = true
				}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case a := <-addr:
		log.Info("source started", "kind", opts.SourceKind, "pid", cmd.Process.Pid, "addr", a)
		return &source{kind: opts.SourceKind, addrs: []string{a}, pid: cmd.Process.Pid, close: stop}, nil
	case <-exited:
		stop()
		return nil, fmt.Errorf("the %s source exited before serving: %v\n%s", opts.SourceKind, waitErr, stderr)
	case <-time.After(60 * time.Second):
		stop()
		return nil, fmt.Errorf("the %s source did not start within 60s:\n%s", opts.SourceKind, stderr)
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// ServeKfake runs a one-broker kfake cluster on 127.0.0.1 for a parent
// Run (`kmirror bench --kfake-source`): it prints "kfake serving on ADDR"
// and serves until ctx ends or stdin reaches EOF (the parent closed it or
// died).
func ServeKfake(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(stdout, "kfake%s%s\n", childServingMarker, c.ListenAddrs()[0])
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(eof)
	}()
	select {
	case <-ctx.Done():
	case <-eof:
	}
	return nil
}

// dataset is the filled source topic.
type dataset struct {
	topic        string
	topicID      [16]byte
	partitions   int
	ends         []int64 // end offset per partition; every topic starts at 0
	bytes        []int64 // whole-batch bytes per partition
	hashes       [][]byte
	records      int64
	totalBytes   int64
	uncompressed int64
	fillTime     time.Duration
	// leaders maps each partition to its source leader's address.
	leaders []string
}

// fill creates the topic, produces the records, reads the end offsets,
// then reads the whole topic once (unmeasured) to learn its batch bytes per
// partition (and their hashes, to verify the mirror). That pass also puts
// every mode on the same footing: the source has served the data once.
func fill(ctx context.Context, opts Options, src *source, log *slog.Logger) (_ *dataset, err error) {
	ds := &dataset{topic: opts.Topic, partitions: opts.Partitions}
	if src.kind == "external" {
		ds.topic = fmt.Sprintf("%s-%d", opts.Topic, time.Now().UnixNano())
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(src.addrs...))
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	rf := int16(1)
	if src.kind == "external" {
		rf = -1 // the cluster's default.replication.factor
	}
	cr, err := adm.CreateTopic(ctx, int32(opts.Partitions), rf, nil, ds.topic)
	if err == nil {
		err = cr.Err
	}
	if err != nil {
		return nil, fmt.Errorf("creating %s on the source: %w", ds.topic, err)
	}
	ds.topicID = cr.ID
	if src.kind == "external" {
		defer func() {
			if err != nil {
				deleteTopic(src, ds.topic, log)
			}
		}()
	}

	codec, _ := CodecByName(opts.Codec)
	n := opts.records()
	perChunk := max(1, min((16<<20)/opts.RecordSize, int(n/int64(opts.Partitions))))
	prod, err := kgo.NewClient(kgo.SeedBrokers(src.addrs...),
		kgo.DefaultProduceTopic(ds.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(max(50000, 2*perChunk)),
	)
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	nvals := max(64, min(4096, (64<<20)/opts.RecordSize))
	vals := bench.LoadValues(nvals, opts.RecordSize)
	var (
		perr   atomic.Pointer[error]
		failed atomic.Bool
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil && failed.CompareAndSwap(false, true) {
			perr.Store(&err)
		}
	}
	start := time.Now()
	log.Info("filling the source", "topic", ds.topic, "records", n, "bytes", n*int64(opts.RecordSize))
	// Each partition gets runs of up to 16 MiB of records in turn, so
	// batches fill to the 1 MiB batch limit as a busy producer's do.
	for i := int64(0); i < n && !failed.Load(); i++ {
		p := int32((i / int64(perChunk)) % int64(opts.Partitions))
		prod.Produce(ctx, &kgo.Record{Partition: p, Value: vals[i%int64(len(vals))]}, promise)
	}
	if err := prod.Flush(ctx); err != nil {
		return nil, fmt.Errorf("filling the source: %w", err)
	}
	if e := perr.Load(); e != nil {
		return nil, fmt.Errorf("filling the source: %w", *e)
	}
	ds.fillTime = time.Since(start)
	ds.uncompressed = n * int64(opts.RecordSize)

	ends, err := adm.ListEndOffsets(ctx, ds.topic)
	if err != nil {
		return nil, fmt.Errorf("listing source end offsets: %w", err)
	}
	ds.ends = make([]int64, opts.Partitions)
	var lerr error
	ends.Each(func(o kadm.ListedOffset) {
		switch {
		case o.Err != nil:
			lerr = errors.Join(lerr, fmt.Errorf("partition %d: %w", o.Partition, o.Err))
		case o.Partition >= 0 && int(o.Partition) < opts.Partitions:
			ds.ends[o.Partition] = o.Offset
			ds.records += o.Offset
		}
	})
	if lerr != nil {
		return nil, fmt.Errorf("listing source end offsets: %w", lerr)
	}
	if ds.records != n {
		return nil, fmt.Errorf("the source holds %d records after the fill, want %d", ds.records, n)
	}
	if ds.leaders, err = leaders(ctx, admCl, ds.topic, opts.Partitions); err != nil {
		return nil, err
	}
	if ds.topicID == [16]byte{} {
		rand.Read(ds.topicID[:])
	}

	// The scan: one connection per source broker, every partition.
	ds.bytes = make([]int64, opts.Partitions)
	if opts.Verify {
		ds.hashes = make([][]byte, opts.Partitions)
	}
	hs := make([]hash.Hash, opts.Partitions)
	if opts.Verify {
		for p := range hs {
			hs[p] = sha256.New()
		}
	}
	onData := func(p int32, b []byte) {
		ds.bytes[p] += int64(len(b))
		if hs[p] != nil {
			hs[p].Write(b)
		}
	}
	var total atomic.Int64
	if err := runDrainJobs(ctx, ds.topic, ds.leaders, ds.ends, opts, 1, onData, &total, nil); err != nil {
		return nil, fmt.Errorf("reading the source topic: %w", err)
	}
	for p, h := range hs {
		if h != nil {
			ds.hashes[p] = h.Sum(nil)
		}
	}
	ds.totalBytes = total.Load()
	log.Info("source filled", "topic", ds.topic, "records", ds.records, "segment_bytes", ds.totalBytes,
		"ratio", fmt.Sprintf("%.2f", float64(ds.uncompressed)/float64(ds.totalBytes)), "took", ds.fillTime.Round(time.Millisecond))
	return ds, nil
}

// leaders returns each partition's leader address.
func leaders(ctx context.Context, cl *kgo.Client, topic string, partitions int) ([]string, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("source metadata: %w", err)
	}
	brokers := map[int32]string{}
	for _, b := range resp.Brokers {
		brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	out := make([]string, partitions)
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("source metadata of %s: %w", topic, err)
		}
		for _, p := range t.Partitions {
			if p.Partition >= 0 && int(p.Partition) < partitions {
				out[p.Partition] = brokers[p.Leader]
			}
		}
	}
	for p, a := range out {
		if a == "" {
			return nil, fmt.Errorf("source metadata: partition %d of %s has no leader", p, topic)
		}
	}
	return out, nil
}
