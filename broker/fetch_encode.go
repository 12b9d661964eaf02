package broker

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/bufpool"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/netio"
)

// The Fetch response, encoded by hand so batch bytes are never decoded or
// re-encoded (STYLE.md item 12). On a real connection the records of each
// partition are not in the buffer at all: netio sends them from the
// segment file with sendfile between the buffer's bytes (netio.Splice).
// Without a connection (tests) or with a file that has no descriptor (the
// fault-injecting file system) they are read into the buffer.
//
//	ThrottleMillis int32 (v1+) | ErrorCode int16 (v7+) | SessionID int32 (v7+)
//	Topics [
//	  Topic string (v4-12) | TopicID uuid (v13+)
//	  Partitions [
//	    Partition int32 | ErrorCode int16 | HighWatermark int64
//	    LastStableOffset int64 | LogStartOffset int64 (v5+)
//	    AbortedTransactions nullable [ProducerID int64 | FirstOffset int64]
//	    PreferredReadReplica int32 (v11+) | Records nullable bytes
//	    tags (v12+): 0 DivergingEpoch{Epoch int32, EndOffset int64}
//	                 1 CurrentLeader{LeaderID int32, LeaderEpoch int32}
//	  ] tags (v12+)
//	] tags (v12+): 0 NodeEndpoints (v16+) [NodeID int32 | Host string
//	               | Port int32 | Rack nullable string | tags]
//
// v12+ uses compact (uvarint length+1) strings, arrays and bytes, and every
// struct ends with a tagged-field section. A differential test checks the
// bytes against kmsg's encoder for every version.

// fetchPartOverhead bounds the encoded size of a partition without records.
const fetchPartOverhead = 96

// encodeFetch appends the response body for the planned partitions.
func (b *Broker) encodeFetch(out []byte, version int16, sessionID int32, fs *fetchScratch, committed bool) []byte {
	// Topic names reach 249 bytes and a flexible aborted entry is 17:
	// an estimate below the real size would grow out by append, a copy
	// and an allocation per response.
	need := 16 + 40*len(fs.topics) + 17*len(fs.aborted)
	for i := range fs.topics {
		need += len(fs.topics[i].name)
	}
	for i := range fs.parts {
		need += fetchPartOverhead
		if fs.conn == nil || !spliceable(fs.parts[i].region.File) {
			need += int(fs.parts[i].region.Length)
		}
	}
	if cap(out)-len(out) < need {
		// The pooled buffer is too small: trade it for one that fits, so
		// the records never force a copy by append growth.
		grown := bufpool.Get(len(out) + need)[:len(out)]
		bufpool.Put(out)
		out = grown
	}
	im := fs.img
	if im == nil {
		im = b.image()
	}
	endpoints := version >= 16 && fetchHasLeaders(fs)
	if endpoints {
		need += 32 * len(im.Brokers())
		for _, br := range im.Brokers() {
			for _, l := range br.Listeners {
				need += len(l.Host)
			}
			if br.Rack != nil {
				need += len(*br.Rack)
			}
		}
	}
	flex := version >= 12
	out = appendI32(out, 0) // throttle
	if version >= 7 {
		out = appendI16(out, 0)
		out = appendI32(out, sessionID)
	}
	ntopics := 0
	for i := range fs.topics {
		if fs.topics[i].count > 0 {
			ntopics++
		}
	}
	out = appendArrayLen(out, ntopics, flex)
	var sent int64
	for ti := range fs.topics {
		ft := &fs.topics[ti]
		if ft.count == 0 {
			continue
		}
		if version >= 13 {
			out = append(out, ft.id[:]...)
		} else {
			out = appendString(out, ft.name, flex)
		}
		out = appendArrayLen(out, ft.count, flex)
		for pi := range fs.parts {
			fp := &fs.parts[pi]
			if fp.topicIdx != ti || !fp.include {
				continue
			}
			out = b.appendFetchPartition(out, version, fp, committed, fs.conn, im.Self())
			sent += fp.region.Length
			if sp := fp.sp; sp != nil {
				sp.sentHW, sp.sentLSO, sp.sentLogStart = fp.info.HighWatermark, fp.info.LastStableOffset, fp.info.LogStartOffset
			}
		}
		if flex {
			out = append(out, 0) // topic tags
		}
	}
	switch {
	case endpoints:
		out = b.appendNodeEndpoints(out, im, fs)
	case flex:
		out = append(out, 0) // response tags
	}
	b.stats.FetchBytes.Add(sent)
	return out
}

// notLeader reports whether the partition answers NOT_LEADER_OR_FOLLOWER
// with the leader the image names (CurrentLeader).
func (fp *fetchPart) notLeader() bool {
	return fp.errCode == kerr.NotLeaderForPartition.Code && fp.ip != nil
}

// fetchHasLeaders reports whether a listed partition names another leader.
func fetchHasLeaders(fs *fetchScratch) bool {
	for i := range fs.parts {
		if fs.parts[i].include && fs.parts[i].notLeader() {
			return true
		}
	}
	return false
}

// appendNodeEndpoints writes the response's tags with NodeEndpoints: the
// brokers named in a CurrentLeader, once each, in the order first named,
// on the listener named like the request's (KIP-951).
func (b *Broker) appendNodeEndpoints(out []byte, im *meta.Image, fs *fetchScratch) []byte {
	var n, size int
	b.eachFetchLeader(im, fs, func(br *meta.Broker, l meta.Listener) {
		n++
		size += 4 + uvarintLen(uint64(len(l.Host)+1)) + len(l.Host) + 4 + 1 + 1
		if br.Rack != nil {
			size += uvarintLen(uint64(len(*br.Rack)+1)) + len(*br.Rack) - 1
		}
	})
	if n == 0 {
		return append(out, 0)
	}
	size += uvarintLen(uint64(n + 1))
	out = append(out, 1, 0) // one tag: 0
	out = appendUvarint(out, uint64(size))
	out = appendUvarint(out, uint64(n+1))
	b.eachFetchLeader(im, fs, func(br *meta.Broker, l meta.Listener) {
		out = appendI32(out, br.ID)
		out = appendString(out, l.Host, true)
		out = appendI32(out, l.Port)
		if br.Rack == nil {
			out = append(out, 0)
		} else {
			out = appendString(out, *br.Rack, true)
		}
		out = append(out, 0)
	})
	return out
}

// eachFetchLeader calls fn for every broker of im named by a listed
// partition's CurrentLeader, once, with its listener for this request.
func (b *Broker) eachFetchLeader(im *meta.Image, fs *fetchScratch, fn func(*meta.Broker, meta.Listener)) {
	listener := ""
	if fs.conn != nil {
		listener = fs.conn.Listener()
	}
	for i := range fs.parts {
		fp := &fs.parts[i]
		if !fp.include || !fp.notLeader() {
			continue
		}
		seen := false
		for j := range i {
			if q := &fs.parts[j]; q.include && q.notLeader() && q.ip.Leader == fp.ip.Leader {
				seen = true
				break
			}
		}
		br := im.Broker(fp.ip.Leader)
		if seen || br == nil {
			continue
		}
		if l, ok := br.Listener(listener); ok {
			fn(br, l)
		}
	}
}

// appendFetchPartition encodes one partition; self is this node's id.
func (b *Broker) appendFetchPartition(out []byte, version int16, fp *fetchPart, committed bool, conn *netio.Conn, self int32) []byte {
	flex := version >= 12
	out = appendI32(out, fp.partition)
	errAt := len(out)
	out = appendI16(out, fp.errCode)
	out = appendI64(out, fp.info.HighWatermark)
	out = appendI64(out, fp.info.LastStableOffset)
	if version >= 5 {
		out = appendI64(out, fp.info.LogStartOffset)
	}
	if committed && fp.errCode == 0 {
		out = appendArrayLen(out, len(fp.aborted), flex)
		for _, a := range fp.aborted {
			out = appendI64(out, a.ProducerID)
			out = appendI64(out, a.FirstOffset)
			if flex {
				out = append(out, 0)
			}
		}
	} else {
		out = appendArrayLen(out, -1, flex)
	}
	if version >= 11 {
		out = appendI32(out, -1) // no preferred read replica
	}
	recAt := len(out)
	n := int(fp.region.Length)
	out = appendBytesLen(out, n, flex)
	if f, ok := fp.region.File.(interface{ Fd() uintptr }); ok && n > 0 && conn != nil {
		// The segment bytes go from the page cache to the socket with
		// sendfile: never copied through this process.
		conn.AddSplice(len(out), f, fp.region.Offset, fp.region.Length)
	} else if n > 0 {
		start := len(out)
		out = out[:start+n]
		if m, err := fp.region.File.ReadAt(out[start:], fp.region.Offset); m != n {
			// The segment went away under us (retention, truncation):
			// answer this partition with no records and a storage error.
			b.log.Warn("fetch read failed", "topic", fp.t.Name(), "partition", fp.partition, "err", err)
			binary.BigEndian.PutUint16(out[errAt:], uint16(kerr.KafkaStorageError.Code))
			out = appendBytesLen(out[:recAt], 0, flex)
			fp.region.Length = 0
		}
	}
	if flex {
		out = appendFetchPartitionTags(out, fp, self)
	}
	return out
}

// spliceable reports whether a segment file can be sent with sendfile.
func spliceable(f any) bool {
	_, ok := f.(interface{ Fd() uintptr })
	return ok
}

// appendFetchPartitionTags writes the partition's tagged fields: the
// diverging epoch, and the current leader, with FENCED_LEADER_EPOCH (this
// node, self) so the client learns our epoch without a metadata round
// trip, and with NOT_LEADER_OR_FOLLOWER (the image's leader) so it learns
// where to go.
func appendFetchPartitionTags(out []byte, fp *fetchPart, self int32) []byte {
	fenced := fp.errCode == kerr.FencedLeaderEpoch.Code && fp.p != nil
	n := 0
	if fp.diverging {
		n++
	}
	if fenced || fp.notLeader() {
		n++
	}
	out = appendUvarint(out, uint64(n))
	if fp.diverging {
		out = append(out, 0, 4+8+1) // tag 0, size
		out = appendI32(out, fp.divEpoch)
		out = appendI64(out, fp.divOffset)
		out = append(out, 0)
	}
	switch {
	case fenced:
		out = append(out, 1, 4+4+1) // tag 1, size
		out = appendI32(out, self)
		out = appendI32(out, fp.leaderEpoch())
		out = append(out, 0)
	case fp.notLeader():
		out = append(out, 1, 4+4+1)
		out = appendI32(out, fp.ip.Leader)
		out = appendI32(out, fp.ip.LeaderEpoch)
		out = append(out, 0)
	}
	return out
}

// appendFetchError is a response with a top-level error (a session error)
// and no topics.
func appendFetchError(out []byte, version int16, code int16) []byte {
	out = appendI32(out, 0)
	out = appendI16(out, code)
	out = appendI32(out, 0)
	out = appendArrayLen(out, 0, version >= 12)
	if version >= 12 {
		out = append(out, 0)
	}
	return out
}
