package netio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsgFlexible is Handler.Flexible as a broker built on kmsg answers it:
// false for keys and versions kmsg does not know.
func kmsgFlexible(key, version int16) bool {
	r := kmsg.RequestForKey(key)
	if r == nil || version < 0 || version > r.MaxVersion() {
		return false
	}
	r.SetVersion(version)
	return r.IsFlexible()
}

// kmsgFrame is req as a client sends it: size, a hand-written request
// header (v2 when the version is flexible) and the body from kmsg.
func kmsgFrame(req kmsg.Request, corr int32, clientID string) []byte {
	r := testReq{
		key:      req.Key(),
		version:  req.GetVersion(),
		corr:     corr,
		clientID: &clientID,
		flexible: req.IsFlexible(),
		body:     req.AppendTo(nil),
	}
	return r.appendTo(nil)
}

// recordBatch is a v2 RecordBatch of n small records with a valid CRC32C,
// as a producer would send it.
func recordBatch(n int) []byte {
	var records []byte
	for i := range n {
		rec := []byte{0}                         // attributes
		rec = binary.AppendVarint(rec, int64(i)) // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = binary.AppendVarint(rec, 3)        // key
		rec = append(rec, "key"...)
		rec = binary.AppendVarint(rec, 5) // value
		rec = append(rec, "value"...)
		rec = binary.AppendVarint(rec, 0) // no headers
		records = binary.AppendVarint(records, int64(len(rec)))
		records = append(records, rec...)
	}
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.LastOffsetDelta = int32(n - 1)
	b.FirstTimestamp = 1_700_000_000_000
	b.MaxTimestamp = b.FirstTimestamp + int64(n-1)
	b.ProducerID = -1
	b.ProducerEpoch = -1
	b.FirstSequence = -1
	b.NumRecords = int32(n)
	b.Records = records
	enc := b.AppendTo(nil)
	binary.BigEndian.PutUint32(enc[8:], uint32(len(enc)-12))
	crc := crc32.Checksum(enc[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(enc[17:], crc)
	return enc
}

// captures are requests as franz-go sends them at connection start and
// when producing.
func captures() [][]byte {
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName = "kgo"
	av.ClientSoftwareVersion = "1.22.3"

	avOld := kmsg.NewPtrApiVersionsRequest()
	avOld.Version = 2

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("orders")
	md.Topics = append(md.Topics, mt)
	md.AllowAutoTopicCreation = true

	pr := kmsg.NewPtrProduceRequest()
	pr.Version = 9
	pr.Acks = -1
	pr.TimeoutMillis = 30_000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = 3
	pp.Records = recordBatch(3)
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)

	prOld := kmsg.NewPtrProduceRequest()
	prOld.Version = 7
	prOld.Acks = 1
	prOld.TimeoutMillis = 5_000
	pt7 := kmsg.NewProduceRequestTopic()
	pt7.Topic = "t"
	pp7 := kmsg.NewProduceRequestTopicPartition()
	pp7.Records = recordBatch(1)
	pt7.Partitions = append(pt7.Partitions, pp7)
	prOld.Topics = append(prOld.Topics, pt7)

	return [][]byte{
		kmsgFrame(av, 1, "kgo"),
		kmsgFrame(avOld, 2, ""),
		kmsgFrame(md, 3, "kgo"),
		kmsgFrame(pr, 4, "kgo-producer"),
		kmsgFrame(prOld, 5, "kgo"),
	}
}

// TestCaptures checks the seed corpus itself: the hand-written headers
// match kmsg's own RequestFormatter byte for byte, and ParseHeader hands
// back a body kmsg decodes.
func TestCaptures(t *testing.T) {
	t.Parallel()
	for _, frame := range captures() {
		h, body, err := ParseHeader(frame[4:], kmsgFlexible)
		if err != nil {
			t.Fatalf("ParseHeader: %v", err)
		}
		req := kmsg.RequestForKey(h.Key)
		req.SetVersion(h.Version)
		if err := req.ReadFrom(body); err != nil {
			t.Fatalf("key %d v%d: kmsg cannot read the body: %v", h.Key, h.Version, err)
		}
		formatted := kmsg.NewRequestFormatter(kmsg.FormatterClientID(string(h.ClientID))).
			AppendRequest(nil, req, h.CorrelationID)
		if !bytes.Equal(formatted, frame) {
			t.Fatalf("key %d v%d: hand-written frame differs from kmsg's:\n% x\n% x", h.Key, h.Version, frame, formatted)
		}
		if h.Flexible != req.IsFlexible() {
			t.Errorf("key %d v%d: Flexible = %v", h.Key, h.Version, h.Flexible)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, c := range captures() {
		f.Add(c[4:], false)
	}
	f.Add(testReq{key: 0, version: 9, flexible: true, rawTags: cat(uvarints(2, 0, 3), []byte("xyz"), uvarints(5, 0))}.frame(), true)
	f.Add(testReq{key: 0, version: 9, flexible: true, rawTags: []byte{0x80, 0x80}}.frame(), true)
	f.Add(testReq{key: 0, version: 9, flexible: true, rawTags: cat(uvarints(1, 0, 10), []byte("abc"))}.frame(), true)
	f.Add(cat(testReq{key: 1}.frame()[:8], []byte{0xff, 0xfe}, []byte("body")), false)
	f.Add(testReq{key: 1, version: 1, clientID: strp("abcd")}.frame()[:13], false)
	f.Fuzz(func(t *testing.T, frame []byte, alwaysFlexible bool) {
		flexible := kmsgFlexible
		if alwaysFlexible {
			flexible = func(int16, int16) bool { return true }
		}
		h, body, err := ParseHeader(frame, flexible)
		if err != nil {
			if !errors.Is(err, ErrFrameInvalid) {
				t.Fatalf("error %v is not ErrFrameInvalid", err)
			}
			return
		}
		if len(frame) < minFrame {
			t.Fatalf("accepted a %d-byte frame", len(frame))
		}
		if h.Key != int16(binary.BigEndian.Uint16(frame)) ||
			h.Version != int16(binary.BigEndian.Uint16(frame[2:])) ||
			h.CorrelationID != int32(binary.BigEndian.Uint32(frame[4:])) {
			t.Fatalf("header %+v does not match % x", h, frame[:8])
		}
		if h.Flexible != flexible(h.Key, h.Version) {
			t.Fatalf("Flexible = %v for key %d v%d", h.Flexible, h.Key, h.Version)
		}
		if n := int16(binary.BigEndian.Uint16(frame[8:])); n > 0 && int(n) != len(h.ClientID) || n <= 0 && len(h.ClientID) != 0 {
			t.Fatalf("client id of %d bytes for length %d", len(h.ClientID), n)
		}
		if len(h.ClientID) > len(frame)-minFrame || !bytes.Equal(h.ClientID, frame[minFrame:minFrame+len(h.ClientID)]) {
			t.Fatalf("client id %q is not the frame's", h.ClientID)
		}
		rest := len(frame) - minFrame - len(h.ClientID)
		switch {
		case !h.Flexible && len(body) != rest:
			t.Fatalf("non-flexible body is %d bytes, want the %d after the client id", len(body), rest)
		case h.Flexible && len(body) >= rest:
			t.Fatalf("flexible body is %d bytes, but a tag section needs one of the %d after the client id", len(body), rest)
		}
		if !bytes.Equal(body, frame[len(frame)-len(body):]) {
			t.Fatal("body is not a suffix of the frame")
		}
		if len(body) > 0 && &body[0] != &frame[len(frame)-len(body)] {
			t.Fatal("body does not alias the frame")
		}
	})
}

// streams are real multi-frame inputs: a client's first requests back to
// back, with and without a bad frame behind them.
func streams() [][]byte {
	c := captures()
	all := bytes.Join(c, nil)
	return [][]byte{
		all,
		cat(c[0], c[2], c[0]),
		cat(c[0], c[3][:len(c[3])-5]),  // last frame partial
		cat(c[1], be32(1<<20+1), c[0]), // too large
		cat(c[2], be32(-7), c[0]),      // negative
		cat(c[0], be32(minFrame-1), []byte("short")), // below minimum
	}
}

// fuzzMaxSize bounds frames in the framing fuzz: small enough that random
// sizes hit both limits, large enough for every capture.
const fuzzMaxSize = 4 << 10

func FuzzFrames(f *testing.F) {
	for _, s := range streams() {
		for _, split := range []uint{0, 1, 3, 4, 5, uint(len(s) / 2), uint(len(s) - 1)} {
			f.Add(s, split)
		}
	}
	f.Fuzz(func(t *testing.T, stream []byte, split uint) {
		checkSplitFraming(t, stream, int(split%uint(len(stream)+1)))
	})
}

// checkSplitFraming frames stream delivered whole and in two pieces cut at
// split (the nats parser fuzz trick), and requires the same result.
func checkSplitFraming(t *testing.T, stream []byte, split int) {
	t.Helper()
	whole := frameChunks(stream, fuzzMaxSize)
	halves := frameChunks(stream, fuzzMaxSize, split)
	sameFraming(t, whole, halves)

	if whole.consumed > len(stream) || whole.consumed+whole.in.InboundBuffered() != len(stream) {
		t.Fatalf("consumed %d, %d left, of %d", whole.consumed, whole.in.InboundBuffered(), len(stream))
	}
	off := 0
	for i, fr := range whole.frames {
		if len(fr) < minFrame || len(fr) > fuzzMaxSize {
			t.Fatalf("frame %d has %d bytes", i, len(fr))
		}
		if int(binary.BigEndian.Uint32(stream[off:])) != len(fr) || !bytes.Equal(fr, stream[off+4:off+4+len(fr)]) {
			t.Fatalf("frame %d is not the stream's bytes at %d", i, off)
		}
		off += 4 + len(fr)
		_, _, _ = ParseHeader(fr, kmsgFlexible) // must not panic
	}
	left := stream[whole.consumed:]
	switch {
	case whole.err != nil:
		if !errors.Is(whole.err, ErrFrameInvalid) && !errors.Is(whole.err, ErrFrameTooLarge) {
			t.Fatalf("unexpected error %v", whole.err)
		}
		if len(left) < 4 {
			t.Fatalf("error %v with only %d bytes left", whole.err, len(left))
		}
	case len(left) >= 4:
		// Framing stopped without an error: the next frame is incomplete.
		if n := int(int32(binary.BigEndian.Uint32(left))); n < minFrame || n > fuzzMaxSize || len(left) >= 4+n {
			t.Fatalf("stopped before a frame of size %d with %d bytes left", n, len(left))
		}
	}
}

// TestFramesSplitEverywhere is the seed-corpus half of FuzzFrames: every
// real stream, cut at every point, and also fed one byte at a time.
func TestFramesSplitEverywhere(t *testing.T) {
	t.Parallel()
	for _, s := range streams() {
		for split := 0; split <= len(s); split++ {
			checkSplitFraming(t, s, split)
		}
		ones := make([]int, len(s))
		for i := range ones {
			ones[i] = 1
		}
		sameFraming(t, frameChunks(s, fuzzMaxSize), frameChunks(s, fuzzMaxSize, ones...))
	}
}
