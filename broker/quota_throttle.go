package broker

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Throttling (quotas.go has the rules). Serve calls throttle after a
// handler when any quota is set: it records the request against the
// sender's quotas and, when one is exceeded, puts the throttle time in the
// response's throttle_time_ms and mutes the connection for it (KIP-219:
// the client is answered at once and not read from meanwhile).
//
// request_percentage counts the time from the handler's start to its
// end, less a Fetch's long-poll wait; JoinGroup and SyncGroup, which wait
// for the other members of their group, count nothing.
//
// Differences from Kafka, said here once: a throttled consumer Fetch is
// answered with its data (Kafka answers it empty and forgets the bytes);
// the bytes count and the mute holds the consumer back the same time, and
// no fetch session is left with positions its client never saw. A client
// at a request version older than KIP-219 (Produce v0-v5, Fetch v0-v7,
// which the broker does not serve anyway for those two keys) would get the
// response at once too, where Kafka delays it; the mute bounds it all the
// same. The Produce request size is its body, without the request header.

// isFollowerFetch reports a fetch from a replica, exempt from the consumer
// quota as in Kafka.
func isFollowerFetch(req *kmsg.FetchRequest) bool {
	return req.ReplicaID >= 0 || (req.Version >= 15 && req.ReplicaState.ID >= 0)
}

// throttle records r against its sender's quotas. start is when the
// handler began, bodyStart where the response body begins in r.out,
// reqBytes the request body's size.
func (b *Broker) throttle(r *request, resp kmsg.Response, start time.Time, bodyStart, reqBytes int) {
	q := b.quotas
	user, clientID := quotaUser(r.principal()), string(r.hdr.ClientID)
	now := time.Now()
	var d time.Duration
	kind := quotaRequest
	countRequest := true
	switch req := r.kreq.(type) {
	case *kmsg.ProduceRequest:
		d, kind = q.record(quotaProduce, user, clientID, float64(reqBytes), now), quotaProduce
		// Kafka leaves acks=0 produce out of the request quota.
		countRequest = req.Acks != 0
	case *kmsg.FetchRequest:
		if !isFollowerFetch(req) && r.raw {
			size := int64(len(r.out)-bodyStart) + r.conn.SplicedBytes()
			d, kind = q.record(quotaFetch, user, clientID, float64(size), now), quotaFetch
		}
	}
	switch r.hdr.Key {
	case joinGroupKey, syncGroupKey:
		// They wait inside the group coordinator for the other members
		// (Kafka parks them off its threads): not counted.
		countRequest = false
	}
	if countRequest {
		// Kafka's unit: percent of one thread's time per second.
		busy := now.Sub(start) - r.parked
		pct := float64(busy.Nanoseconds()) * 100 / float64(time.Second)
		if rd := q.record(quotaRequest, user, clientID, pct, now); rd > d {
			// The larger throttle wins and is counted, as in Kafka.
			d, kind = rd, quotaRequest
		}
	}
	if d <= 0 {
		return
	}
	ms := int32(min(d.Milliseconds(), math.MaxInt32))
	switch {
	case r.raw && r.hdr.Key == fetchKey && len(r.out) >= bodyStart+4:
		// Fetch v1+ starts with throttle_time_ms (fetch_encode.go).
		binary.BigEndian.PutUint32(r.out[bodyStart:], uint32(ms))
	case resp != nil:
		if t, ok := resp.(kmsg.SetThrottleResponse); ok {
			t.SetThrottle(ms)
		}
	}
	b.stats.Throttled[kind].Add(1)
	b.stats.ThrottleMillis[kind].Add(int64(ms))
	r.conn.Mute(d)
}
