package fetch

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"

	"github.com/kmirror/kmirror/internal/retry"
)

// Fetch versions: v12 has fetch sessions, diverging epochs and current
// leader info and names topics; v13+ name them by id only, which mirror
// topics share with their source but sources before Kafka 2.8 lack. A
// fetcher whose partitions all have source topic ids fetches by id (up to
// v16, whose NOT_LEADER answers carry the new leader's endpoint), so a
// topic recreated at the source answers UNKNOWN_TOPIC_ID instead of
// handing over another topic's records at the same offsets.
const (
	maxFetchVersionByName = 12
	maxFetchVersion       = 16
)

// fetcher is one goroutine fetching a set of partitions from one source
// broker over its own connection, in a fetch session (KIP-227).
type fetcher struct {
	mr   *mirror
	key  fetcherKey
	addr string
	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}

	mu    sync.Mutex
	parts map[topicPartition]*partState
	wake  chan struct{}
	// handling is held while a response is applied, so remove can wait for
	// the partition to be left alone.
	handling sync.Mutex

	conn *sourceConn
	sess session
	req  *kmsg.FetchRequest
	// names maps the topic ids of a by-id request back to names: v13+
	// responses carry ids only.
	names map[[16]byte]string
	// answered is touchQuiet's scratch set, reused across responses.
	answered map[topicPartition]bool
	// failing is set from a failed fetch until one succeeds, so a dead
	// broker is logged once, not at every backoff. Fetcher goroutine only.
	failing bool

	// The pipeline: while one response is applied (CRC check, append) on
	// an applier goroutine, the next Fetch is already on the wire, asking
	// at the offsets the applied response will leave (predicted). Two
	// responses and read buffers alternate; requested records, per
	// response, the offset each partition was fetched at, and the applier
	// only appends where the log end still equals it, so a wrong
	// prediction costs a round trip, never a gap.
	resps     [2]*kmsg.FetchResponse
	requested [2]map[topicPartition]int64
	cur       int
	spare     []byte
	predicted map[topicPartition]prediction
	// The applier is one goroutine for the fetcher's life, started with
	// the first response: jobs carries a response to it, results the
	// answer back. pending is set while an apply runs.
	jobs    chan applyJob
	results chan applied
	pending bool
	// chunk is the applier's scratch summary of the batches it appends.
	chunk batch.Chunk

	// Scratch of buildRequest, reused across requests.
	reqParts  map[topicPartition]*partState
	reqTopics map[string]int
	reqForgot map[string][]int32
}

// applyJob is a response for the applier.
type applyJob struct {
	resp      *kmsg.FetchResponse
	requested map[topicPartition]int64
	buf       []byte
	sent      time.Time
}

// prediction is where a partition will stand once the response being
// applied is appended.
type prediction struct {
	offset int64
	epoch  int32
	// ps is the partition state the prediction was made for: a partition
	// stopped and started again is a new state, and an old prediction must
	// not place its first fetch.
	ps *partState
}

// applied is what the applier hands back: the read buffer, free again, and
// the partitions whose predictions no longer hold.
type applied struct {
	buf    []byte
	resync []topicPartition
}

// session is the client side of a fetch session: what the source believes
// each partition's position is.
type session struct {
	id    int32
	epoch int32 // 0: the next request is a full fetch that opens one
	sent  map[topicPartition]sentPosition
}

type sentPosition struct {
	offset           int64
	currentEpoch     int32
	lastFetchedEpoch int32
}

func newFetcher(mr *mirror, key fetcherKey, addr string) *fetcher {
	ctx, cancel := context.WithCancel(mr.ctx)
	f := &fetcher{mr: mr, key: key, addr: addr, ctx: ctx, stop: cancel, done: make(chan struct{}),
		parts: map[topicPartition]*partState{}, wake: make(chan struct{}, 1),
		req: kmsg.NewPtrFetchRequest(), names: map[[16]byte]string{}, answered: map[topicPartition]bool{},
		resps:     [2]*kmsg.FetchResponse{kmsg.NewPtrFetchResponse(), kmsg.NewPtrFetchResponse()},
		requested: [2]map[topicPartition]int64{{}, {}},
		predicted: map[topicPartition]prediction{},
		reqParts:  map[topicPartition]*partState{}, reqTopics: map[string]int{}, reqForgot: map[string][]int32{}}
	f.sess.sent = map[topicPartition]sentPosition{}
	go f.run()
	return f
}

func (f *fetcher) add(ps *partState) {
	f.mu.Lock()
	f.parts[ps.tp] = ps
	f.mu.Unlock()
	f.poke()
}

// remove takes ps away and waits until a response being applied is done.
func (f *fetcher) remove(ps *partState) {
	f.mu.Lock()
	if f.parts[ps.tp] == ps {
		delete(f.parts, ps.tp)
	}
	f.mu.Unlock()
	f.handling.Lock()
	//lint:ignore SA2001 an empty critical section is the point: wait out a response.
	f.handling.Unlock()
	f.poke()
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) close() { f.stop() }

func (f *fetcher) wait() {
	f.stop()
	<-f.done
}

// run is the fetch loop.
func (f *fetcher) run() {
	defer close(f.done)
	defer func() {
		f.finishApply()
		if f.jobs != nil {
			close(f.jobs) // the applier ends
		}
		if f.conn != nil {
			f.conn.Close()
		}
	}()
	for f.ctx.Err() == nil {
		if !f.hasPartitions() {
			select {
			case <-f.ctx.Done():
				return
			case <-f.wake:
			}
			continue
		}
		if err := f.mr.throttle.wait(f.ctx); err != nil {
			return
		}
		if err := f.fetchOnce(); err != nil {
			if f.ctx.Err() != nil {
				return // closed: the cancellation broke the request, not the source
			}
			f.mr.m.stats.ConnectionErrors.Add(1)
			if f.conn != nil {
				f.conn.Close()
				f.conn = nil
			}
			f.resetSession()
			f.releaseAll(err)
		}
	}
}

// releaseAll hands every partition back to the resolver after a failed
// connection or request: the broker may be dead, and its partitions led
// elsewhere by now. After mirror.fetch.backoff.ms the resolver looks their
// leaders up again through the source metadata (any live broker answers
// it) and assigns them to the fetcher of the leader it finds, this one
// again if the broker still leads them.
func (f *fetcher) releaseAll(err error) {
	f.mu.Lock()
	parts := make([]*partState, 0, len(f.parts))
	for tp, ps := range f.parts {
		parts = append(parts, ps)
		delete(f.parts, tp)
	}
	f.mu.Unlock()
	released, delay := 0, retry.Jitter(f.mr.cfg.FetchBackoff)
	for _, ps := range parts {
		if ps.backoff(f, err, delay) {
			released++
		}
	}
	f.mr.wakeResolverAfter(delay)
	// Logged when the broker starts failing, not at every backoff while
	// it stays dead (the partitions come back to it until the source
	// elects other leaders); the recovery is logged by fetchOnce.
	if !f.failing {
		f.failing = true
		f.mr.m.log.Warn("source fetch failed; looking up the leaders again after each backoff (logged once until "+
			"the broker answers again)", "mirror", f.mr.cfg.Name, "broker", f.addr, "partitions", released,
			"backoff", f.mr.cfg.FetchBackoff, "err", err)
	}
}

func (f *fetcher) hasPartitions() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.parts) > 0
}

func (f *fetcher) resetSession() {
	f.finishApply()
	f.sess.id, f.sess.epoch = 0, 0
	clear(f.sess.sent)
	clear(f.predicted)
}

// fetchOnce sends one Fetch and applies the answer. An error means the
// connection is unusable.
func (f *fetcher) fetchOnce() error {
	if f.conn == nil {
		cfg := f.mr.cfg
		conn, err := dialSource(f.ctx, f.addr, sourceConnConfig{ClientID: "kmirror-mirror-" + cfg.Name,
			DialTimeout: cfg.DialTimeout, RequestTimeout: cfg.RequestTimeout,
			ReceiveBuffer: cfg.ReceiveBuffer, Dialer: cfg.Dialer, TLS: cfg.TLS, SASL: cfg.SASL})
		if err != nil {
			return err
		}
		f.conn = conn
	}
	byID := f.allHaveTopicIDs()
	maxVersion := int16(maxFetchVersionByName)
	if byID {
		maxVersion = maxFetchVersion
	}
	version := f.conn.version(1, 4, maxVersion)
	if version < 0 {
		return &unsupportedError{addr: f.addr}
	}
	if version < 7 || (version >= 13) != (f.req.Version >= 13) {
		// No sessions before v7; and a session opened by name cannot go
		// on by id or the other way round.
		f.resetSession()
	}
	f.buildRequest(version)
	requested, resp := f.requested[f.cur], f.resps[f.cur]
	clear(requested)
	for tp, pos := range f.sess.sent {
		requested[tp] = pos.offset
	}
	start := time.Now()
	if err := f.conn.roundTrip(f.ctx, f.req, resp); err != nil {
		return err
	}
	if f.failing {
		f.failing = false
		f.mr.m.log.Info("source broker answers again", "mirror", f.mr.cfg.Name, "broker", f.addr)
	}
	if version >= 13 {
		for i := range resp.Topics {
			resp.Topics[i].Topic = f.names[resp.Topics[i].TopicID] // "" for an id not asked: ignored
		}
	}
	stats := &f.mr.m.stats
	stats.FetchRequests.Add(1)
	stats.FetchNanos.Add(int64(time.Since(start)))
	if code := resp.ErrorCode; code != 0 {
		// A session the source forgot or whose epoch we missed: start over
		// with a full fetch. Anything else: back off on this connection.
		f.resetSession()
		if code == kerr.FetchSessionIDNotFound.Code || code == kerr.InvalidFetchSessionEpoch.Code {
			return nil
		}
		return kerr.ErrorForCode(code)
	}
	f.advanceSession(version, resp)
	// The previous response is applied by now or soon: wait for it, take
	// its buffer back for the next read, then hand this one over.
	f.finishApply()
	buf := f.conn.swapReadBuffer(f.spare)
	f.spare = nil
	f.predict(resp, requested)
	f.startApply(resp, requested, buf, start)
	f.cur ^= 1
	return nil
}

// predict records where each partition of resp will stand after its whole
// batches are appended, so the next request can ask from there before the
// append is done. Batch headers only: the applier checks CRCs.
func (f *fetcher) predict(resp *kmsg.FetchResponse, requested map[topicPartition]int64) {
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			tp := topicPartition{rt.Topic, rp.Partition}
			if rp.ErrorCode != 0 || rp.DivergingEpoch.EndOffset >= 0 {
				delete(f.predicted, tp)
				continue
			}
			from, ok := requested[tp]
			if !ok {
				continue
			}
			next, epoch := from, int32(-1)
			it := batch.NewIterator(rp.RecordBatches)
			it.SkipCRC()
			for b, ok := it.Next(); ok; b, ok = it.Next() {
				if b.NextOffset() > next {
					next, epoch = b.NextOffset(), b.PartitionLeaderEpoch()
				}
			}
			if next > from {
				f.mu.Lock()
				ps := f.parts[tp]
				f.mu.Unlock()
				f.predicted[tp] = prediction{offset: next, epoch: epoch, ps: ps}
			}
		}
	}
}

// startApply hands resp, the answer to a Fetch sent at sent, to the
// applier. REQUIRES: no apply pending (finishApply ran).
func (f *fetcher) startApply(resp *kmsg.FetchResponse, requested map[topicPartition]int64, buf []byte, sent time.Time) {
	if f.jobs == nil {
		f.jobs, f.results = make(chan applyJob, 1), make(chan applied, 1)
		go f.applier(f.jobs, f.results)
	}
	f.pending = true
	f.jobs <- applyJob{resp: resp, requested: requested, buf: buf, sent: sent}
}

// applier applies the responses of jobs, one at a time, until jobs is
// closed. One goroutine per fetcher rather than one per response: the
// applies of a fetcher never overlap anyway (finishApply waits for one
// before the next starts).
func (f *fetcher) applier(jobs <-chan applyJob, results chan<- applied) {
	for j := range jobs {
		results <- applied{buf: j.buf, resync: f.apply(j.resp, j.requested, j.sent)}
	}
}

// finishApply waits for the response being applied, if any.
func (f *fetcher) finishApply() {
	if !f.pending {
		return
	}
	r := <-f.results
	f.pending = false
	f.spare = r.buf
	for _, tp := range r.resync {
		delete(f.predicted, tp)
	}
	f.mu.Lock()
	for tp := range f.predicted {
		if f.parts[tp] == nil {
			delete(f.predicted, tp) // a partition that left: start afresh if it returns
		}
	}
	f.mu.Unlock()
}

// buildRequest fills f.req for the owned partitions.
// In a session only partitions whose position changed are listed, and
// partitions no longer owned are forgotten.
func (f *fetcher) buildRequest(version int16) {
	cfg := f.mr.cfg
	f.mu.Lock()
	parts := f.reqParts
	clear(parts)
	for tp, ps := range f.parts {
		parts[tp] = ps
	}
	f.mu.Unlock()

	req := f.req
	req.Version = version
	req.ReplicaID = -1
	req.ReplicaState.ID, req.ReplicaState.Epoch = -1, -1
	req.MaxWaitMillis = int32(cfg.FetchWaitMax / time.Millisecond)
	req.MinBytes, req.MaxBytes = cfg.FetchMinBytes, cfg.FetchMaxBytes
	if a := f.mr.throttle.allowance(); a >= 0 && a < int64(req.MaxBytes) {
		// Throttled: ask for no more than the credit left (see allowance).
		req.MaxBytes = int32(a)
		req.MinBytes = min(req.MinBytes, req.MaxBytes)
	}
	req.IsolationLevel = 0 // READ_UNCOMMITTED: markers and aborted data are mirrored too
	req.SessionID, req.SessionEpoch = f.sess.id, f.sess.epoch
	if version < 7 {
		req.SessionID, req.SessionEpoch = 0, -1
	}
	full := req.SessionEpoch <= 0
	req.Topics, req.ForgottenTopics = req.Topics[:0], req.ForgottenTopics[:0]
	byTopic := f.reqTopics
	clear(byTopic)
	for tp, ps := range parts {
		offset, cur, last := ps.fetchPosition()
		if p, ok := f.predicted[tp]; ok && p.ps == ps {
			// The response being applied will leave the log here.
			offset, last = p.offset, p.epoch
		}
		pos := sentPosition{offset: offset, currentEpoch: cur, lastFetchedEpoch: last}
		if !full && f.sess.sent[tp] == pos {
			continue
		}
		i, ok := byTopic[tp.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.topic] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = tp.topic, ps.topicID()
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch = tp.partition, offset, cur
		rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = last, -1, cfg.PartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		f.sess.sent[tp] = pos
	}
	if !full {
		forgotten := f.reqForgot
		clear(forgotten) // the request's ForgottenTopics own the last slices
		for tp := range f.sess.sent {
			if parts[tp] == nil {
				forgotten[tp.topic] = append(forgotten[tp.topic], tp.partition)
				delete(f.sess.sent, tp)
			}
		}
		for t, ps := range forgotten {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID, ft.Partitions = t, f.idOf(t), ps
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
	} else {
		for tp := range f.sess.sent {
			if parts[tp] == nil {
				delete(f.sess.sent, tp)
			}
		}
	}
}

// allHaveTopicIDs reports whether every partition of the fetcher has a
// source topic id, so the fetcher may fetch by id; it also refreshes the
// id-to-name map the by-id responses are read with.
func (f *fetcher) allHaveTopicIDs() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	all := len(f.parts) > 0
	for _, ps := range f.parts {
		id := ps.topicID()
		if id == [16]byte{} {
			all = false
			continue
		}
		f.names[id] = ps.tp.topic
	}
	return all
}

// idOf is the topic id the fetcher used for topic, for ForgottenTopics.
func (f *fetcher) idOf(topic string) [16]byte {
	for id, name := range f.names {
		if name == topic {
			return id
		}
	}
	return [16]byte{}
}

// advanceSession moves the session epoch after a successful response.
func (f *fetcher) advanceSession(version int16, resp *kmsg.FetchResponse) {
	switch {
	case version < 7:
	case f.sess.epoch == 0 && resp.SessionID != 0:
		f.sess.id, f.sess.epoch = resp.SessionID, 1
	case f.sess.epoch == 0:
		// The source keeps no session for us (cache full): stay on full
		// fetches.
		f.sess.id = 0
	default:
		f.sess.epoch++
		if f.sess.epoch < 0 {
			f.sess.epoch = 1
		}
	}
}

// apply hands each answered partition of resp, the answer to a Fetch sent
// at sent, to its state and returns the partitions whose next position is
// not what predict assumed.
func (f *fetcher) apply(resp *kmsg.FetchResponse, requested map[topicPartition]int64, sent time.Time) (resync []topicPartition) {
	f.handling.Lock()
	defer f.handling.Unlock()
	f.touchQuiet(resp, requested, sent)
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			tp := topicPartition{rt.Topic, rp.Partition}
			if rp.ErrorCode != 0 {
				// Counted whether or not the partition is still ours: the
				// source did answer it.
				stats := &f.mr.m.stats
				stats.ErrorsByCode[min(int(rp.ErrorCode), len(stats.ErrorsByCode)-1)].Add(1)
			}
			f.mu.Lock()
			ps := f.parts[tp]
			f.mu.Unlock()
			from, asked := requested[tp]
			if ps == nil || !asked {
				continue // removed while the request was out
			}
			if rp.ErrorCode == 0 && ps.local.LogEndOffset() != from {
				// Asked at a predicted offset the previous apply did not
				// reach (it failed, truncated or skipped): drop this data,
				// the next request asks at the real log end.
				resync = append(resync, tp)
				continue
			}
			before := ps.local.LogEndOffset()
			drop := ps.handle(f, rp, sent)
			if drop || rp.ErrorCode != 0 || rp.DivergingEpoch.EndOffset >= 0 || !f.reached(tp, ps, before) {
				resync = append(resync, tp)
			}
			if drop {
				// handle already handed ps back (rehome, fail), so the
				// resolver may have assigned it again, to this very
				// fetcher, before we get here: drop it only if it is not
				// ours again, or it would be lost (owned by no fetcher
				// while its state says fetching). f.mu is held across the
				// check: a reassignment sets ps.fetcher before f.add.
				f.mu.Lock()
				if f.parts[tp] == ps && !ps.ownedBy(f) {
					delete(f.parts, tp)
				}
				f.mu.Unlock()
			}
		}
	}
	return resync
}

// touchQuiet records a successful fetch for the requested partitions
// that the response leaves out: in a fetch session the source answers
// only partitions with news, so silence is a current "nothing new", and
// an idle partition must look neither stalled nor old, nor its lag in
// seconds grow.
func (f *fetcher) touchQuiet(resp *kmsg.FetchResponse, requested map[topicPartition]int64, sent time.Time) {
	answered := f.answered
	clear(answered)
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			answered[topicPartition{resp.Topics[i].Topic, resp.Topics[i].Partitions[j].Partition}] = true
		}
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for tp := range requested {
		if ps := f.parts[tp]; ps != nil && !answered[tp] {
			leo := ps.local.LogEndOffset()
			ps.mu.Lock()
			ps.lastFetch = now
			if ps.sourceHW >= 0 {
				// Left out means unchanged: the source names a partition
				// of the session whenever its high watermark, LSO or log
				// start moves. So the last known offsets are current.
				ps.sourceUpdated = now
				ps.lag.observe(ps.sourceHW, sent, leo)
			}
			ps.mu.Unlock()
		}
	}
}

// reached reports whether ps's log end moved as predicted, or did not
// move when nothing was predicted. (predicted is read here under no lock:
// the fetcher goroutine only writes it between applies.)
func (f *fetcher) reached(tp topicPartition, ps *partState, before int64) bool {
	leo := ps.local.LogEndOffset()
	if p, ok := f.predicted[tp]; ok && p.ps == ps {
		return leo == p.offset
	}
	return leo == before
}

type unsupportedError struct{ addr string }

func (e *unsupportedError) Error() string {
	return "source broker " + e.addr + " serves no Fetch version from 4 (Kafka 0.11+ with record batch v2 is required)"
}
