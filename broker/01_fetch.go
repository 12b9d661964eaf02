package broker

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/netio"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"
)

// Fetch: v4-17
//
// Behavior:
// Consumers read stored batches (mirror followers in a cluster will too). Each
// partition is answered from the log: read_uncommitted up to the high
// watermark, read_committed up to the last stable offset with the aborted
// transactions of the range. The response is encoded by hand (fetch_encode.go)
// with the batch bytes read from the segment straight into the response
// buffer: never decoded, never re-encoded, no allocation per response once
// the pools are warm.
//
// The first partition with data may exceed the response and partition byte
// limits by one batch (KIP-74); later partitions get data only while the
// response budget lasts. When less than MinBytes is ready the request waits
// up to MaxWaitMillis for an append to any of its partitions (long poll); the
// wait is on this connection's worker, never on an event loop.
//
// A partition the metadata image gives to another node answers
// NOT_LEADER_OR_FOLLOWER with, from v12, the leader and its epoch in
// CurrentLeader and, from v16, that leader's endpoint in NodeEndpoints
// (KIP-951), as Kafka fills them. CurrentLeaderEpoch (v9+) older than the
// image's is FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH. LastFetchedEpoch (v12+) that diverges from our epoch
// history returns DivergingEpoch and no records. Fetch sessions: see
// fetch_session.go.
//
// Authorization: a consumer needs READ on each topic, else its partitions
// answer TOPIC_AUTHORIZATION_FAILED (an unknown topic ID still answers
// UNKNOWN_TOPIC_ID, and no partition's existence is revealed otherwise);
// a follower fetch (replica id >= 0) needs CLUSTER_ACTION on the cluster,
// else every partition answers TOPIC_AUTHORIZATION_FAILED. Partitions of
// a session are checked again at every fetch. A refused partition does
// not end a long poll on the others (one that refuses every partition is
// answered at once), as in Kafka. The checks read the authorizer's
// in-memory index: no allocation, no store access.
//
// Version notes:
// v4 is the floor: record batch v2 (magic 2) only, as in Kafka 4.0.
// v7 sessions, v9 current leader epoch, v11 rack (ignored: one node),
// v12 flexible and diverging epochs, v13 topic IDs, v15 replica state.
func init() { regKey(fetchKey, 4, 17, (*Broker).handleFetch) }

const fetchKey = 1

// fetchPart is one partition of a Fetch being answered.
type fetchPart struct {
	topicIdx  int // index into fetchScratch.topics
	t         *partition.Topic
	p         *partition.Partition
	ip        *meta.Partition // p in the request's image, nil if not there yet
	sp        *sessionPart    // session position, nil when sessionless
	partition int32
	offset    int64
	maxBytes  int32
	curEpoch  int32
	lastEpoch int32

	errCode   int16
	info      storage.ReadInfo
	region    storage.Region
	divEpoch  int32
	divOffset int64
	diverging bool
	// wakes is p.Wakes() before p was read (waitForAppend).
	wakes   uint64
	aborted []storage.AbortedTxn // aliases fetchScratch.aborted, read_committed only
	include bool
	denied  bool // not authorized: TOPIC_AUTHORIZATION_FAILED
}

// fetchTopic is a topic of the response, in request (or session) order.
type fetchTopic struct {
	name  string
	id    [16]byte
	count int // included partitions
}

// fetchScratch is a connection's reusable Fetch state. Requests of one
// connection never overlap, so it needs no lock.
type fetchScratch struct {
	// conn receives the records as sendfile splices; nil reads them into
	// the response buffer instead.
	conn   *netio.Conn
	parts  []fetchPart
	topics []fetchTopic
	// img is the metadata image of the request being answered, nil
	// between requests.
	img *meta.Image
	// replica is the follower's node id of a replica fetch, -1 for a
	// consumer's; replicaEpoch its broker epoch (ReplicaState, v15+; -1
	// unknown).
	replica      int32
	replicaEpoch int64
	aborted      []storage.AbortedTxn
	wake         chan struct{}
	timer        *time.Timer
}

func (b *Broker) fetchScratch(r *request) *fetchScratch {
	cs := connState(r.conn)
	if cs.fetch == nil {
		cs.fetch = &fetchScratch{wake: make(chan struct{}, 1), conn: r.conn}
	}
	return cs.fetch
}

func (b *Broker) handleFetch(r *request) (kmsg.Response, error) {
	if b.scope(r.conn) == scopeController {
		return b.handleMetadataLogFetch(r) // an observer's (metadata_log_rpcs.go)
	}
	req := r.kreq.(*kmsg.FetchRequest)
	b.stats.FetchRequests.Add(1)
	fs := b.fetchScratch(r)
	fs.parts, fs.topics = fs.parts[:0], fs.topics[:0]
	fs.img = b.image()
	defer func() { fs.img = nil }()
	fs.replica, fs.replicaEpoch = -1, -1
	if isFollowerFetch(req) {
		fs.replica = max(req.ReplicaID, req.ReplicaState.ID)
		if req.Version >= 15 {
			fs.replicaEpoch = req.ReplicaState.Epoch
		}
	}

	sess, sessErr := b.fetchSessionFor(req, fs)
	if sess != nil {
		defer sess.mu.Unlock()
	}
	if sessErr != nil {
		r.out = appendFetchError(r.out, req.Version, sessErr.Code)
		r.raw = true
		return nil, nil
	}
	sessionID, incremental := int32(0), false
	if sess != nil {
		sessionID, incremental = sess.id, req.SessionEpoch > sessionEpochInitial
	}
	b.authorizeFetch(r, req, fs)

	if b.quotas.on.Load() && !isFollowerFetch(req) {
		// No response larger than the consumer quota allows in a whole
		// window (Kafka's maxValueInQuotaWindow, quotas.go).
		limit := b.quotas.fetchMaxBytes(quotaUser(r.principal()), string(r.hdr.ClientID))
		req.MaxBytes = min(req.MaxBytes, limit)
		req.MinBytes = min(req.MinBytes, req.MaxBytes)
	}
	committed := req.IsolationLevel == 1
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	for {
		total, anyErr := b.planFetch(req.Version, fs, committed, req.MaxBytes, incremental)
		if total >= int64(req.MinBytes) || anyErr || req.MaxWaitMillis <= 0 || !time.Now().Before(deadline) {
			break
		}
		// The long poll is not request-handling time (request_percentage,
		// quota_throttle.go): Kafka parks the fetch off its threads.
		if hook := b.fetchParking.Load(); hook != nil {
			(*hook)() // tests: an append between the read and the wait
		}
		parked := time.Now()
		appended := b.waitForAppend(fs, deadline)
		r.parked += time.Since(parked)
		if !appended {
			break
		}
	}
	r.out = b.encodeFetch(r.out, req.Version, sessionID, fs, committed)
	r.raw = true
	if sess != nil {
		sess.lastUsed = time.Now()
	}
	return nil, nil
}

// fetchSessionFor applies the request's session fields: it creates,
// continues or closes a session, fills fs.parts with the partitions to
// answer and returns the session, locked, or nil for a sessionless fetch.
func (b *Broker) fetchSessionFor(req *kmsg.FetchRequest, fs *fetchScratch) (*fetchSession, *kerr.Error) {
	var sess *fetchSession
	switch {
	case req.Version < 7 || (req.SessionID == 0 && req.SessionEpoch == sessionEpochFinal):
		// Sessionless full fetch.
	case req.SessionEpoch == sessionEpochFinal:
		b.sessions.remove(req.SessionID) // close, answer as a full fetch
	case req.SessionEpoch == sessionEpochInitial:
		if req.SessionID != 0 {
			b.sessions.remove(req.SessionID)
		}
		sess = b.sessions.create(time.Now())
		if sess != nil {
			sess.mu.Lock()
		}
	default:
		if sess = b.sessions.get(req.SessionID); sess == nil {
			return nil, kerr.FetchSessionIDNotFound
		}
		sess.mu.Lock()
		if sess.epoch != req.SessionEpoch {
			sess.mu.Unlock()
			return nil, kerr.InvalidFetchSessionEpoch
		}
		// Only an incremental fetch moves the epoch on: a new session
		// already expects epoch 1 next.
		sess.epoch = nextSessionEpoch(sess.epoch)
	}
	byID := req.Version >= 13
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			fp := fetchPart{partition: rp.Partition, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes,
				curEpoch: rp.CurrentLeaderEpoch, lastEpoch: rp.LastFetchedEpoch, topicIdx: -1}
			key := sessionKey{partition: rp.Partition}
			if byID {
				key.topicID = rt.TopicID
			} else {
				key.topic = rt.Topic
			}
			if sess != nil {
				fp.sp = sess.upsert(sessionPart{key: key, fetchOffset: fp.offset, maxBytes: fp.maxBytes,
					currentEpoch: fp.curEpoch, lastFetchedEpoch: fp.lastEpoch})
				continue
			}
			b.addFetchPart(fs, fp, key)
		}
	}
	if sess == nil {
		return nil, nil
	}
	for i := range req.ForgottenTopics {
		ft := &req.ForgottenTopics[i]
		for _, p := range ft.Partitions {
			key := sessionKey{partition: p}
			if byID {
				key.topicID = ft.TopicID
			} else {
				key.topic = ft.Topic
			}
			sess.forget(key)
		}
	}
	// Answer every partition of the session, in session order.
	for _, sp := range sess.parts {
		b.addFetchPart(fs, fetchPart{partition: sp.key.partition, offset: sp.fetchOffset, maxBytes: sp.maxBytes,
			curEpoch: sp.currentEpoch, lastEpoch: sp.lastFetchedEpoch, sp: sp, topicIdx: -1}, sp.key)
	}
	return sess, nil
}

func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// addFetchPart resolves a partition's topic and appends it, grouping
// partitions of one topic under one response topic.
func (b *Broker) addFetchPart(fs *fetchScratch, fp fetchPart, key sessionKey) {
	if key.topicID != ([16]byte{}) {
		fp.t = b.partitions.TopicByID(key.topicID)
	} else {
		fp.t = b.partitions.Topic(key.topic)
	}
	if fp.t != nil && fp.partition >= 0 && int(fp.partition) < len(fp.t.Partitions()) {
		fp.p = fp.t.Partitions()[fp.partition]
		fp.ip = imagePartitionOf(fs.img, imageTopic(fs.img, fp.t), fp.partition)
	}
	if n := len(fs.topics); n > 0 && fs.topics[n-1].name == key.topic && fs.topics[n-1].id == key.topicID {
		fp.topicIdx = n - 1
	} else {
		fs.topics = append(fs.topics, fetchTopic{name: key.topic, id: key.topicID})
		fp.topicIdx = len(fs.topics) - 1
	}
	fs.parts = append(fs.parts, fp)
}

// planFetch locates every partition's data without copying it and decides
// which partitions the response lists. It returns the bytes found and
// whether any partition has an error (which ends a long poll at once).
func (b *Broker) planFetch(version int16, fs *fetchScratch, committed bool, maxBytes int32, incremental bool) (total int64, anyErr bool) {
	fs.aborted = fs.aborted[:0]
	budget := int64(maxBytes)
	readable := false // some partition is not refused by the authorizer
	for i := range fs.topics {
		fs.topics[i].count = 0
	}
	for i := range fs.parts {
		fp := &fs.parts[i]
		fp.errCode, fp.diverging, fp.aborted, fp.region = 0, false, nil, storage.Region{}
		fp.info = storage.ReadInfo{FirstOffset: -1, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}
		b.readFetchPart(version, fp, fs, committed, &budget, total == 0)
		total += fp.region.Length
		switch {
		case fp.denied:
			// As in Kafka, a partition refused by the authorizer does
			// not end a long poll on the others.
		case fp.errCode != 0:
			anyErr = true
			readable = true
		default:
			readable = true
		}
		fp.include = !incremental || fp.changed()
		if fp.include {
			fs.topics[fp.topicIdx].count++
		}
	}
	// Every partition refused: nothing to wait for, answer at once.
	return total, anyErr || (!readable && len(fs.parts) > 0)
}

// changed reports whether an incremental response must list the partition.
func (fp *fetchPart) changed() bool {
	sp := fp.sp
	return sp == nil || fp.errCode != 0 || fp.region.Length > 0 || fp.diverging ||
		fp.info.HighWatermark != sp.sentHW || fp.info.LastStableOffset != sp.sentLSO ||
		fp.info.LogStartOffset != sp.sentLogStart
}

// readFetchPart fills one partition's answer.
func (b *Broker) readFetchPart(version int16, fp *fetchPart, fs *fetchScratch, committed bool, budget *int64, first bool) {
	p := fp.p
	if p != nil {
		fp.wakes = p.Wakes()
	}
	switch {
	case fp.t == nil && version >= 13:
		fp.errCode = kerr.UnknownTopicID.Code
		return
	case fp.denied:
		fp.errCode = kerr.TopicAuthorizationFailed.Code
		return
	case p == nil:
		fp.errCode = kerr.UnknownTopicOrPartition.Code
		return
	case fp.ip != nil && fp.ip.Leader != fs.img.Self():
		fp.errCode = kerr.NotLeaderForPartition.Code
		return
	}
	if code := checkLeaderEpoch(fp.curEpoch, fp.leaderEpoch()); code != 0 {
		fp.errCode = code
		return
	}
	if fp.lastEpoch >= 0 {
		// Kafka's order: an epoch we cannot place, or an offset below the
		// log start, is OFFSET_OUT_OF_RANGE (a DivergingEpoch of -1/-1
		// would read as "no divergence" and the follower would spin).
		e, end := p.Log().EndOffsetForEpoch(fp.lastEpoch)
		switch info := partitionInfo(p.Log()); {
		case e < 0 || end < 0 || fp.offset < info.LogStartOffset:
			fp.errCode = kerr.OffsetOutOfRange.Code
			return
		case e < fp.lastEpoch || end < fp.offset:
			fp.diverging, fp.divEpoch, fp.divOffset = true, e, end
			fp.info = info
			return
		}
	}
	// KIP-74: every partition reads at most min(partition limit, what is
	// left of the response limit); the first partition with data still
	// returns its first batch whole when that batch alone is larger.
	limit := min(int64(fp.maxBytes), *budget)
	upTo := p.Log().HighWatermark()
	switch {
	case fs.replica >= 0:
		// A follower copies the whole log; its fetch offset is its log
		// end, which moves the high watermark once the read below found
		// it in the log (replicas.go).
		upTo = p.Log().LogEndOffset()
	case committed:
		upTo = p.Log().LastStableOffset()
	}
	var err error
	if limit <= 0 && !first {
		fp.info = partitionInfo(p.Log())
		if fp.offset < fp.info.LogStartOffset || fp.offset > fp.info.LogEndOffset {
			err = storage.ErrOffsetOutOfRange
		}
	} else {
		fp.region, fp.info, err = p.Log().ReadRegion(fp.offset, int(max(limit, 1)), upTo)
	}
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		fp.errCode = kerr.OffsetOutOfRange.Code
		fp.info.HighWatermark, fp.info.LastStableOffset, fp.info.LogStartOffset = -1, -1, -1
		fp.region = storage.Region{}
		return
	case err != nil:
		fp.errCode = kerr.KafkaStorageError.Code
		fp.region = storage.Region{}
		if !batch.IsCorruption(err) { // damage is logged once by the log, not at every fetch that meets it
			b.log.Warn("fetch read failed", "topic", p.Topic().Name(), "partition", p.Index(), "err", err)
		}
		return
	}
	if fs.replica >= 0 && p.ReplicaFetched(fs.replica, fs.replicaEpoch, fp.offset, time.Now()) {
		b.isrChangeWanted()
	}
	if !first && fp.region.Length > limit {
		fp.region = storage.Region{} // KIP-74: only the first partition may overshoot
	}
	*budget -= fp.region.Length
	if committed && fp.region.Length > 0 {
		start := len(fs.aborted)
		fs.aborted = p.Log().Producers().AppendAbortedTxns(fs.aborted, fp.offset, fp.info.LastStableOffset)
		fp.aborted = fs.aborted[start:len(fs.aborted):len(fs.aborted)]
	}
}

// leaderEpoch is the partition's leader epoch in the request's image.
// REQUIRES: fp.p != nil.
func (fp *fetchPart) leaderEpoch() int32 {
	if fp.ip != nil {
		return fp.ip.LeaderEpoch
	}
	return fp.p.LeaderEpoch()
}

// partitionInfo reads the offsets a partition answers with when no read
// runs.
func partitionInfo(l *storage.Log) storage.ReadInfo {
	return storage.ReadInfo{
		FirstOffset:      -1,
		HighWatermark:    l.HighWatermark(),
		LastStableOffset: l.LastStableOffset(),
		LogStartOffset:   l.LogStartOffset(),
		LogEndOffset:     l.LogEndOffset(),
	}
}

// waitForAppend parks the request until an append to one of its
// partitions, the deadline or shutdown. It returns false when the broker
// is closing. An append between the read and the registration here has
// no signal left to send: it is found by the partition's wake count, and
// the request reads again at once.
func (b *Broker) waitForAppend(fs *fetchScratch, deadline time.Time) bool {
	select {
	case <-fs.wake:
	default:
	}
	missed := false
	for i := range fs.parts {
		if p := fs.parts[i].p; p != nil {
			p.Wait(fs.wake)
			missed = missed || p.Wakes() != fs.parts[i].wakes
		}
	}
	if missed {
		select {
		case fs.wake <- struct{}{}:
		default:
		}
	}
	d := time.Until(deadline)
	if fs.timer == nil {
		fs.timer = time.NewTimer(d)
	} else {
		fs.timer.Reset(d)
	}
	open := true
	select {
	case <-fs.wake:
	case <-fs.timer.C:
	case <-b.closing:
		open = false
	}
	fs.timer.Stop()
	for i := range fs.parts {
		if p := fs.parts[i].p; p != nil {
			p.Unwait(fs.wake)
		}
	}
	return open
}
