package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/bench"
)

// produceVersion is the Produce version of every request: the newest that
// names topics (v13 addresses them by id), flexible, answered by kmirror,
// kfake and Kafka 4.4 alike.
const produceVersion = 11

// Header positions rewritten in a generated batch (the batch package doc's
// diagram; these are part of the wire format).
const (
	offBaseOffset    = 0
	offLeaderEpoch   = 12
	offBaseTimestamp = 27
	offMaxTimestamp  = 35
	offProducerID    = 43
	offProducerEpoch = 51
	offBaseSequence  = 53
	offCRCStart      = 21
	offCRC           = 17
)

// payload is the batch every partition of every request carries: a
// bench.GenBatch batch made a plain (non-idempotent) client's, so that a
// broker appends every copy rather than dropping repeats as duplicates.
type payload struct {
	codec   batch.Codec
	size    int // the size asked for; the batch is at most this
	batch   []byte
	records int64
	// plain is the batch's size uncompressed: header plus the records
	// section decompressed.
	plain int64
}

// newPayload generates the batch of codec of at most size bytes.
func newPayload(codec batch.Codec, size int, now time.Time) (payload, error) {
	raw, err := bench.GenBatch(codec, size)
	if err != nil {
		return payload{}, err
	}
	b, err := batch.Parse(raw)
	if err != nil {
		return payload{}, fmt.Errorf("parsing the generated batch: %w", err)
	}
	c, err := bench.NewCodecs()
	if err != nil {
		return payload{}, err
	}
	defer c.Close()
	plain, err := c.Decompress(nil, b.Records(), codec)
	if err != nil {
		return payload{}, fmt.Errorf("decompressing the generated batch: %w", err)
	}
	clientBatch(raw, now)
	return payload{codec: codec, size: size, batch: raw, records: int64(b.RecordCount()),
		plain: int64(batch.HeaderSize + len(plain))}, nil
}

// clientBatch turns b into the batch a producer without idempotence
// sends (base offset 0, leader epoch, producer id, epoch and sequence -1)
// whose first record is stamped now:
// the generator's timestamps are from 2026-01-01, which a broker's
// retention by time would delete. It rewrites the CRC32C last.
func clientBatch(b []byte, now time.Time) {
	be := binary.BigEndian
	base := int64(be.Uint64(b[offBaseTimestamp:]))
	shift := now.UnixMilli() - base
	be.PutUint64(b[offBaseTimestamp:], uint64(base+shift))
	be.PutUint64(b[offMaxTimestamp:], be.Uint64(b[offMaxTimestamp:])+uint64(shift))
	be.PutUint64(b[offBaseOffset:], 0)
	be.PutUint32(b[offLeaderEpoch:], ^uint32(0))
	be.PutUint64(b[offProducerID:], ^uint64(0))
	be.PutUint16(b[offProducerEpoch:], ^uint16(0))
	be.PutUint32(b[offBaseSequence:], ^uint32(0))
	be.PutUint32(b[offCRC:], batch.Checksum(b[offCRCStart:]))
}

// load is one measured produce run against one target.
type load struct {
	topic      string
	partitions int
	acks       int16
	conns      int
	inFlight   int
	warmup     time.Duration
	duration   time.Duration
	// maxBytes ends the window early once this many wire bytes are
	// acknowledged in it; 0 means the window lasts duration.
	maxBytes int64
}

// result is what one run measured. The counts are of acknowledged
// partition batches inside the window; total* include warm-up and the
// requests in flight when the window closed, for a read-back check.
type result struct {
	wire, plain, records int64
	elapsed              time.Duration
	// cpu is the target process's CPU in the window; cpuKnown false when
	// the target runs in this process or there is no /proc.
	cpu      time.Duration
	cpuKnown bool
	// self is this process's CPU (the load generator), idle the other
	// targets' (idle brokers), irq the machine's interrupt time (much of
	// loopback TCP), others the rest of the machine's busy time: noise.
	self, idle, irq, others time.Duration
	totalWire               int64
	totalRecords            int64
}

// MBps is uncompressed (plain) or wire MB (10^6 B) per second.
func (r result) MBps(wire bool) float64 {
	n := r.plain
	if wire {
		n = r.wire
	}
	return float64(n) / 1e6 / r.elapsed.Seconds()
}

// RecordsPerSec is records acknowledged per second.
func (r result) RecordsPerSec() float64 { return float64(r.records) / r.elapsed.Seconds() }

// CPUPerGB is the target's CPU seconds per 10^9 uncompressed bytes.
func (r result) CPUPerGB() float64 { return r.cpu.Seconds() / (float64(r.plain) / 1e9) }

var errStopped = errors.New("produce bench: stopped")

// produce runs l against the broker at addr, whose process is pid (0: in
// this process), and returns what the window measured; idle are the
// processes of the other targets, whose CPU is kept out of the noise. Every partition
// answer must be success, except retriable errors during the warm-up
// (a topic just created may not have its leader everywhere yet).
func produce(ctx context.Context, addr string, pid int, idle []int, p payload, l load) (result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(errStopped)
	var (
		acked     atomic.Int64 // partition batches acknowledged since the warm-up ended
		total     atomic.Int64 // partition batches acknowledged, all of them
		measuring atomic.Bool
		wg        sync.WaitGroup
	)
	for i := range l.conns {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return result{}, fmt.Errorf("connecting to %s: %w", addr, err)
		}
		pc := &produceConn{conn: conn, req: produceRequest(l, p.batch, int32(i)), inFlight: l.inFlight,
			ok: func(n int64) {
				total.Add(n)
				if measuring.Load() {
					acked.Add(n)
				}
			},
			warm: func() bool { return !measuring.Load() }}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pc.run(ctx); err != nil && !errors.Is(err, errStopped) {
				cancel(err)
			}
		}()
	}
	wait := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	fail := func(err error) (result, error) {
		cancel(err)
		wg.Wait()
		return result{}, err
	}
	if err := wait(l.warmup); err != nil {
		return fail(err)
	}
	m0 := snapshot(pid, idle...)
	measuring.Store(true)
	start := time.Now()
	end := start.Add(l.duration)
	perBatch := int64(len(p.batch))
	for time.Now().Before(end) && (l.maxBytes == 0 || acked.Load()*perBatch < l.maxBytes) {
		if err := wait(10 * time.Millisecond); err != nil {
			return fail(err)
		}
	}
	n := acked.Load()
	elapsed := time.Since(start)
	m1 := snapshot(pid, idle...)
	cancel(errStopped)
	wg.Wait()
	if err := context.Cause(ctx); !errors.Is(err, errStopped) {
		return result{}, err
	}
	r := result{wire: n * perBatch, plain: n * p.plain, records: n * p.records, elapsed: elapsed,
		totalWire: total.Load() * perBatch, totalRecords: total.Load() * p.records}
	r.cpu, r.cpuKnown = m1.target-m0.target, pid > 0 && m0.ok && m1.ok
	r.self, r.idle, r.irq = m1.self-m0.self, m1.idle-m0.idle, m1.irq-m0.irq
	r.others = max(0, m1.busy-m0.busy-r.self-r.cpu-r.idle)
	return r, nil
}

// produceRequest is the encoded request of connection conn: one batch for
// every partition, correlation id 0 (patched per send).
func produceRequest(l load, b []byte, conn int32) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = produceVersion
	req.Acks = l.acks
	req.TimeoutMillis = 30_000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = l.topic
	for i := range l.partitions {
		pt := kmsg.NewProduceRequestTopicPartition()
		pt.Partition = int32(i)
		pt.Records = b
		t.Partitions = append(t.Partitions, pt)
	}
	req.Topics = append(req.Topics, t)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("produce-bench-%d", conn)))
	return f.AppendRequest(nil, req, 0)
}

// produceConn sends the same request over one connection, up to inFlight
// unanswered at a time, as a producer with max.in.flight.requests does,
// and reads the answers in order.
type produceConn struct {
	conn     net.Conn
	req      []byte // size, key, version, correlation id at [8:12], ...
	inFlight int
	ok       func(n int64) // n partition batches acknowledged
	warm     func() bool   // in the warm-up: retriable errors tolerated
}

// run sends and reads until ctx ends, then waits for the answers in flight.
func (c *produceConn) run(ctx context.Context) error {
	defer c.conn.Close()
	slots := make(chan struct{}, c.inFlight)
	sent := make(chan int32, c.inFlight)
	readErr := make(chan error, 1)
	go func() { readErr <- c.read(sent, slots) }()
	var corr int32
	var err error
send:
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			break send
		case err = <-readErr:
			return err
		}
		binary.BigEndian.PutUint32(c.req[8:], uint32(corr))
		if _, err = c.conn.Write(c.req); err != nil {
			err = fmt.Errorf("sending a Produce request: %w", err)
			break send
		}
		sent <- corr
		corr++
	}
	close(sent)
	// The answers in flight get 30 s (the request timeout), not forever.
	c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if rerr := <-readErr; err == nil {
		err = rerr
	}
	if err == nil {
		err = errStopped
	}
	return err
}

// read reads one answer for each correlation id on sent, in order.
func (c *produceConn) read(sent <-chan int32, slots <-chan struct{}) error {
	br := bufio.NewReaderSize(c.conn, 64<<10)
	var buf []byte
	for corr := range sent {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return fmt.Errorf("reading a Produce response: %w", err)
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n < 5 || n > 64<<20 {
			return fmt.Errorf("produce response of %d bytes", n)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("reading a Produce response: %w", err)
		}
		if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
			return fmt.Errorf("produce response for correlation id %d, want %d", got, corr)
		}
		okN, err := c.check(buf[4:])
		if err != nil {
			return err
		}
		c.ok(okN)
		<-slots
	}
	return nil
}

// check decodes a response body (after the correlation id) and returns
// how many partitions succeeded.
func (c *produceConn) check(body []byte) (int64, error) {
	r := kbin.Reader{Src: body}
	kmsg.SkipTags(&r) // response header v1
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = produceVersion
	if err := resp.ReadFrom(r.Src); err != nil {
		return 0, fmt.Errorf("decoding a Produce response: %w", err)
	}
	var n int64
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				n++
				continue
			}
			err := kerr.ErrorForCode(p.ErrorCode)
			if c.warm() && kerr.IsRetriable(err) {
				continue
			}
			msg := ""
			if p.ErrorMessage != nil {
				msg = ": " + *p.ErrorMessage
			}
			return 0, fmt.Errorf("produce to %s/%d: %w%s", t.Topic, p.Partition, err, msg)
		}
	}
	return n, nil
}
