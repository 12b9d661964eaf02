package mirror

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
)

// rawConn is a plain Kafka connection that sends Fetch requests and reads
// each response into one reused buffer: the drain mode's client, and the
// reader behind the scan and the byte-for-byte verification. Like the
// mirror's source connection it decodes responses with kmsg (byte fields
// alias the buffer), so the drain pays the same decoding, not more.
type rawConn struct {
	conn         net.Conn
	stopWatch    func() bool
	corr         int32
	wbuf, rbuf   []byte
	fetchVersion int16
}

const (
	rawClientID = "kmirror-bench-drain"
	// rawMaxFetchVersion is the fetchers' maxFetchVersion: topics by
	// name, flexible, no topic IDs.
	rawMaxFetchVersion = 12
	rawMaxResponse     = 256 << 20
	rawRequestTimeout  = 30 * time.Second
)

// dialRaw connects and asks ApiVersions v0 which Fetch version to use.
func dialRaw(ctx context.Context, addr string) (*rawConn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &rawConn{conn: conn}
	// A cancelled ctx closes the socket, which ends any blocked I/O.
	c.stopWatch = context.AfterFunc(ctx, func() { conn.Close() })
	req := kmsg.NewPtrApiVersionsRequest()
	body, err := c.exchange(req, 0)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := resp.ReadFrom(body); err != nil {
		c.Close()
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		c.Close()
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	c.fetchVersion = -1
	for _, k := range resp.ApiKeys {
		if k.ApiKey == int16(kmsg.Fetch) {
			c.fetchVersion = min(k.MaxVersion, rawMaxFetchVersion)
		}
	}
	if c.fetchVersion < 4 {
		c.Close()
		return nil, fmt.Errorf("%s serves no Fetch version from 4", addr)
	}
	return c, nil
}

func (c *rawConn) Close() error {
	c.stopWatch()
	return c.conn.Close()
}

// exchange writes req and returns the response body, a sub-slice of
// c.rbuf valid until the next exchange. wait is the time the broker may
// hold the request on purpose.
func (c *rawConn) exchange(req kmsg.Request, wait time.Duration) ([]byte, error) {
	c.corr++
	w := append(c.wbuf[:0], 0, 0, 0, 0)
	w = binary.BigEndian.AppendUint16(w, uint16(req.Key()))
	w = binary.BigEndian.AppendUint16(w, uint16(req.GetVersion()))
	w = binary.BigEndian.AppendUint32(w, uint32(c.corr))
	w = binary.BigEndian.AppendUint16(w, uint16(len(rawClientID)))
	w = append(w, rawClientID...)
	if req.IsFlexible() {
		w = append(w, 0) // no header tags
	}
	w = req.AppendTo(w)
	binary.BigEndian.PutUint32(w, uint32(len(w)-4))
	c.wbuf = w
	if err := c.conn.SetDeadline(time.Now().Add(rawRequestTimeout + wait)); err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(w); err != nil {
		return nil, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c.conn, hdr[:]); err != nil {
		return nil, err
	}
	size := int(int32(binary.BigEndian.Uint32(hdr[:])))
	if size < 4 || size > rawMaxResponse {
		return nil, fmt.Errorf("response size %d out of range", size)
	}
	if cap(c.rbuf) < size {
		c.rbuf = make([]byte, size)
	}
	c.rbuf = c.rbuf[:size]
	if _, err := io.ReadFull(c.conn, c.rbuf); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(c.rbuf)); got != c.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, c.corr)
	}
	body := c.rbuf[4:]
	if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		n, ok := tagsLen(body)
		if !ok {
			return nil, errors.New("malformed response header tags")
		}
		body = body[n:]
	}
	return body, nil
}

// tagsLen is the length of a tagged-field section at the start of b.
func tagsLen(b []byte) (int, bool) {
	num, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, false
	}
	at := n
	for ; num > 0; num-- {
		if _, n = binary.Uvarint(b[at:]); n <= 0 {
			return 0, false
		}
		at += n
		size, n := binary.Uvarint(b[at:])
		if n <= 0 || size > uint64(len(b)-at-n) {
			return 0, false
		}
		at += n + int(size)
	}
	return at, true
}

// drainJob is what one drain connection reads: partitions of one topic
// from offset 0 (or from) up to their end offsets.
type drainJob struct {
	addr       string
	topic      string
	partitions []int32
	// ends[p] is partition p's end offset; offsets[p] is where it is,
	// updated as responses arrive (read by lag samples).
	ends    []int64
	offsets []atomic.Int64
	// bytes counts whole-batch bytes read, across jobs.
	bytes *atomic.Int64
	// onData, when set, sees each partition's whole new batches in
	// order (the scan hashes them). It runs on the job's goroutine.
	onData func(partition int32, batches []byte)

	fetchMaxBytes, partitionMaxBytes int32
	maxWait                          time.Duration
}

// run fetches until every partition reached its end.
func (j *drainJob) run(ctx context.Context) error {
	c, err := dialRaw(ctx, j.addr)
	if err != nil {
		return fmt.Errorf("source %s: %w", j.addr, err)
	}
	defer c.Close()
	req := kmsg.NewPtrFetchRequest()
	req.Version = c.fetchVersion
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(j.maxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = 1, j.fetchMaxBytes
	req.IsolationLevel = 0
	// No fetch session: every request names its partitions, as the
	// fetchers' session requests do while every partition advances.
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = j.topic
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrFetchResponse()
	active := append([]int32(nil), j.partitions...)
	for {
		active = active[:0]
		for _, p := range j.partitions {
			if j.offsets[p].Load() < j.ends[p] {
				active = append(active, p)
			}
		}
		if len(active) == 0 {
			return nil
		}
		parts := req.Topics[0].Partitions[:0]
		for _, p := range active {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch = p, j.offsets[p].Load(), -1
			rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = -1, -1, j.partitionMaxBytes
			parts = append(parts, rp)
		}
		req.Topics[0].Partitions = parts
		body, err := c.exchange(req, j.maxWait)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("fetch from %s: %w", j.addr, err)
		}
		resp.Version = req.Version
		if err := resp.ReadFrom(body); err != nil {
			return fmt.Errorf("decoding a fetch response from %s: %w", j.addr, err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("fetch from %s: %w", j.addr, err)
		}
		for i := range resp.Topics {
			for k := range resp.Topics[i].Partitions {
				if err := j.apply(&resp.Topics[i].Partitions[k]); err != nil {
					return err
				}
			}
		}
	}
}

// apply advances one partition past the whole batches of a response.
func (j *drainJob) apply(rp *kmsg.FetchResponseTopicPartition) error {
	p := rp.Partition
	if p < 0 || int(p) >= len(j.ends) {
		return fmt.Errorf("fetch answered unknown partition %d", p)
	}
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return fmt.Errorf("%s-%d at offset %d: %w", j.topic, p, j.offsets[p].Load(), err)
	}
	off := j.offsets[p].Load()
	it := batch.NewIterator(rp.RecordBatches)
	it.SkipCRC()
	start, end := -1, 0
	for {
		from := it.Consumed()
		b, ok := it.Next()
		if !ok {
			break
		}
		if b.LastOffset() < off {
			continue // answered from inside a batch already read
		}
		if start < 0 {
			start = from
		}
		off = b.NextOffset()
		end = it.Consumed()
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("%s-%d: %w", j.topic, p, err)
	}
	if start >= 0 {
		if j.onData != nil {
			j.onData(p, rp.RecordBatches[start:end])
		}
		j.bytes.Add(int64(end - start))
		j.offsets[p].Store(off)
	}
	return nil
}
