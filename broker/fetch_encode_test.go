package broker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/vfs"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"
)

// The hand-made Fetch encoder (fetch_encode.go) against kmsg's.

// buildDiff turns the cases into a fetchScratch as planFetch leaves it and
// into the kmsg response the encoder must produce.
func buildDiff(b *Broker, v int16, committed bool, sessionID int32, topics []diffTopic, parts []diffPart, fencedP *partition.Partition) (*fetchScratch, *kmsg.FetchResponse) {
	fs := &fetchScratch{}
	for _, dt := range topics {
		fs.topics = append(fs.topics, fetchTopic{name: dt.name, id: dt.id})
	}
	for _, dp := range parts {
		fp := fetchPart{topicIdx: dp.topic, t: topics[dp.topic].t, partition: dp.partition, errCode: dp.errCode,
			info: dp.info, region: dp.region, diverging: dp.diverging, divEpoch: 2, divOffset: 17, include: dp.include}
		if dp.fenced {
			fp.p = fencedP
		}
		if dp.notLeader {
			fp.ip = &diffNotLeader
			fs.img = meta.NewBuilder("diff", b.cfg.NodeID, b.cfg.NodeID).AddBroker(meta.Broker{ID: b.cfg.NodeID}).
				AddBroker(meta.Broker{ID: 2, Rack: &node2Rack, Listeners: []meta.Listener{{Name: "PLAINTEXT", Host: node2Host, Port: node2Port}}}).
				Build()
		}
		if dp.session {
			fp.sp = &sessionPart{sentHW: -1, sentLSO: -1, sentLogStart: -1}
		}
		if committed && dp.errCode == 0 {
			start := len(fs.aborted)
			fs.aborted = append(fs.aborted, dp.aborted...)
			fp.aborted = fs.aborted[start:len(fs.aborted):len(fs.aborted)]
		}
		if dp.include {
			fs.topics[dp.topic].count++
		}
		fs.parts = append(fs.parts, fp)
	}

	want := &kmsg.FetchResponse{Version: v}
	if v >= 7 {
		want.SessionID = sessionID
	}
	for ti, dt := range topics {
		if fs.topics[ti].count == 0 {
			continue
		}
		rt := kmsg.NewFetchResponseTopic()
		if v >= 13 {
			rt.TopicID = dt.id
		} else {
			rt.Topic = dt.name
		}
		for _, dp := range parts {
			if dp.topic != ti || !dp.include {
				continue
			}
			kp := kmsg.NewFetchResponseTopicPartition()
			kp.Partition, kp.ErrorCode = dp.partition, dp.errCode
			kp.HighWatermark, kp.LastStableOffset = dp.info.HighWatermark, dp.info.LastStableOffset
			if v >= 5 {
				kp.LogStartOffset = dp.info.LogStartOffset
			}
			if committed && dp.errCode == 0 {
				kp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
				for _, a := range dp.aborted {
					kp.AbortedTransactions = append(kp.AbortedTransactions,
						kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
				}
			}
			// Our encoder never writes null records; kmsg writes nil as null.
			kp.RecordBatches = append([]byte{}, dp.records...)
			if v >= 12 && dp.diverging {
				kp.DivergingEpoch.Epoch, kp.DivergingEpoch.EndOffset = 2, 17
			}
			if v >= 12 && dp.fenced {
				kp.CurrentLeader.LeaderID, kp.CurrentLeader.LeaderEpoch = b.cfg.NodeID, fencedP.LeaderEpoch()
			}
			if v >= 12 && dp.notLeader {
				kp.CurrentLeader.LeaderID, kp.CurrentLeader.LeaderEpoch = diffNotLeader.Leader, diffNotLeader.LeaderEpoch
			}
			if v >= 16 && dp.notLeader && len(want.Brokers) == 0 {
				want.Brokers = []kmsg.FetchResponseBroker{{NodeID: 2, Host: node2Host, Port: node2Port, Rack: &node2Rack}}
			}
			rt.Partitions = append(rt.Partitions, kp)
		}
		want.Topics = append(want.Topics, rt)
	}
	return fs, want
}

// diffNotLeader is the image entry of a partition node 2 leads.
var diffNotLeader = meta.Partition{Leader: 2, LeaderEpoch: node2Epoch}

// firstDiff describes where two encodings part.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-8)
	return fmt.Sprintf("lengths %d and %d, first difference at byte %d:\n got  % x\n want % x",
		len(got), len(want), i, got[lo:min(len(got), i+16)], want[lo:min(len(want), i+16)])
}

func TestFetchEncodeDifferential(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	data := mustTopic(t, b, "diff-data", 1)
	fenced := mustTopic(t, b, "diff-fenced", 1)
	pd, pf := data.Partitions()[0], fenced.Partitions()[0]
	mustAppend(t, pd, plainBatch(3, 20), 0)
	mustAppend(t, pd, plainBatch(2, 30), 0)
	mustAppend(t, pf, plainBatch(1, 5), 5) // leader epoch 5 for CurrentLeader
	if e := pf.LeaderEpoch(); e != 5 {
		t.Fatalf("fenced partition leader epoch %d, want 5", e)
	}
	hw := pd.Log().HighWatermark()
	full, fullInfo, err := pd.Log().ReadRegion(0, 1<<20, hw)
	if err != nil {
		t.Fatal(err)
	}
	tail, tailInfo, err := pd.Log().ReadRegion(3, 1<<20, hw)
	if err != nil {
		t.Fatal(err)
	}
	fullBytes, tailBytes := mustRead(t, pd.Log(), 0, 1<<20, hw), mustRead(t, pd.Log(), 3, 1<<20, hw)
	if int64(len(fullBytes)) != full.Length || int64(len(tailBytes)) != tail.Length || tail.Length >= full.Length {
		t.Fatalf("regions %d/%d bytes, reads %d/%d", full.Length, tail.Length, len(fullBytes), len(tailBytes))
	}
	okInfo := storage.ReadInfo{HighWatermark: 5, LastStableOffset: 4, LogStartOffset: 1, LogEndOffset: 5}
	errInfo := storage.ReadInfo{FirstOffset: -1, HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}
	topics := []diffTopic{
		{"diff-data", data.ID(), data},
		{"diff-all-unchanged", [16]byte{9, 9}, nil},
		{"diff-fenced", fenced.ID(), fenced},
		{"diff-unknown-topic-with-a-longer-name", [16]byte{7, 7, 7}, nil},
	}
	parts := []diffPart{
		{topic: 0, partition: 0, region: full, records: fullBytes, info: fullInfo, include: true, session: true},
		{topic: 0, partition: 1, region: tail, records: tailBytes, info: tailInfo, include: true,
			aborted: []storage.AbortedTxn{{ProducerID: 7, FirstOffset: 3, LastOffset: 4}}},
		{topic: 0, partition: 2, info: okInfo, include: true,
			aborted: []storage.AbortedTxn{{ProducerID: 8, FirstOffset: 1}, {ProducerID: 1 << 40, FirstOffset: 2}}},
		{topic: 0, partition: 3, region: tail, records: tailBytes, info: okInfo, include: false},
		{topic: 1, partition: 0, info: okInfo, include: false},
		{topic: 2, partition: 0, errCode: kerr.FencedLeaderEpoch.Code, info: errInfo, fenced: true, include: true},
		// Parts of one topic need not be adjacent in fs.parts.
		{topic: 0, partition: 4, errCode: kerr.OffsetOutOfRange.Code, info: errInfo, include: true},
		{topic: 0, partition: 5, info: okInfo, diverging: true, include: true},
		{topic: 1, partition: 1, info: okInfo, include: false},
		{topic: 3, partition: 0, errCode: kerr.UnknownTopicOrPartition.Code, info: errInfo, include: true},
		{topic: 0, partition: 6, errCode: kerr.UnknownLeaderEpoch.Code, info: errInfo, include: true},
		// Led by node 2, twice: NodeEndpoints names it once.
		{topic: 0, partition: 7, errCode: kerr.NotLeaderForPartition.Code, info: errInfo, notLeader: true, include: true},
		{topic: 2, partition: 1, errCode: kerr.NotLeaderForPartition.Code, info: errInfo, notLeader: true, include: true},
	}
	for v := int16(4); v <= 17; v++ {
		for _, committed := range []bool{false, true} {
			t.Run(fmt.Sprintf("v=%d/committed=%v", v, committed), func(t *testing.T) {
				ps := append([]diffPart(nil), parts...)
				if v >= 13 {
					ps[9].errCode = kerr.UnknownTopicID.Code
				}
				fs, want := buildDiff(b, v, committed, 0x1234, topics, ps, pf)
				got := b.encodeFetch(nil, v, 0x1234, fs, committed)
				if wantBytes := want.AppendTo(nil); !bytes.Equal(got, wantBytes) {
					t.Fatalf("encoding differs from kmsg: %s", firstDiff(got, wantBytes))
				}
				dec := kmsg.FetchResponse{Version: v}
				if err := dec.ReadFrom(got); err != nil {
					t.Fatalf("kmsg cannot decode our bytes: %v", err)
				}
				if !reflect.DeepEqual(&dec, want) {
					t.Fatalf("decoded\n %+v\nwant\n %+v", dec, *want)
				}
				// The session learns what the client was told.
				if sp := fs.parts[0].sp; sp.sentHW != fullInfo.HighWatermark || sp.sentLSO != fullInfo.LastStableOffset ||
					sp.sentLogStart != fullInfo.LogStartOffset {
					t.Fatalf("session part after encode: %+v, want the offsets of %+v", *sp, fullInfo)
				}
			})
		}
	}
}

// TestFetchEncodeShortRead covers a region whose file is shorter than
// planned (a segment cut by retention): the partition answers
// KAFKA_STORAGE_ERROR with no records, and the response stays well formed.
func TestFetchEncodeShortRead(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "short-read", 1)
	path := filepath.Join(t.TempDir(), "segment")
	if err := os.WriteFile(path, plainBatch(2, 10), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	info := storage.ReadInfo{HighWatermark: 10, LastStableOffset: 10, LogStartOffset: 0, LogEndOffset: 10}
	for _, v := range []int16{4, 11, 12, 17} {
		fs := &fetchScratch{topics: []fetchTopic{{name: tp.Name(), id: tp.ID(), count: 2}}}
		fs.parts = []fetchPart{
			{t: tp, partition: 0, region: storage.Region{File: f, Offset: 1 << 20, Length: 200}, info: info, include: true},
			{t: tp, partition: 1, info: info, include: true},
		}
		got := b.encodeFetch(nil, v, 0, fs, true)
		want := &kmsg.FetchResponse{Version: v}
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = tp.Name(), tp.ID()
		for i, code := range []int16{kerr.KafkaStorageError.Code, 0} {
			kp := kmsg.NewFetchResponseTopicPartition()
			kp.Partition, kp.ErrorCode, kp.HighWatermark, kp.LastStableOffset, kp.LogStartOffset = int32(i), code, 10, 10, 0
			kp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			kp.RecordBatches = []byte{}
			rt.Partitions = append(rt.Partitions, kp)
		}
		want.Topics = append(want.Topics, rt)
		if wantBytes := want.AppendTo(nil); !bytes.Equal(got, wantBytes) {
			t.Fatalf("v%d: %s", v, firstDiff(got, wantBytes))
		}
		if fs.parts[0].region.Length != 0 {
			t.Fatalf("v%d: failed region still counts %d bytes", v, fs.parts[0].region.Length)
		}
	}
}

// TestFetchEncodeSessionError covers the top-level error response.
func TestFetchEncodeSessionError(t *testing.T) {
	t.Parallel()
	for v := int16(7); v <= 17; v++ {
		got := appendFetchError(nil, v, kerr.InvalidFetchSessionEpoch.Code)
		want := &kmsg.FetchResponse{Version: v, ErrorCode: kerr.InvalidFetchSessionEpoch.Code}
		if wantBytes := want.AppendTo(nil); !bytes.Equal(got, wantBytes) {
			t.Fatalf("v%d: %s", v, firstDiff(got, wantBytes))
		}
	}
}
