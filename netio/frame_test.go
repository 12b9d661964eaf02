package netio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"
)

// testReq describes one request frame; tests build their input from it so
// every byte of a malformed frame is written down on purpose.
type testReq struct {
	key      int16
	version  int16
	corr     int32
	clientID *string // nil is the null client id (length -1)
	// flexible appends a request header v2 tagged-field section: rawTags
	// verbatim when set, else an empty section (one 0 byte).
	flexible bool
	rawTags  []byte
	body     []byte
}

// appendTo appends the frame with its int32 size prefix.
func (r testReq) appendTo(dst []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0) // size, filled in below
	dst = binary.BigEndian.AppendUint16(dst, uint16(r.key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(r.version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.corr))
	if r.clientID == nil {
		dst = binary.BigEndian.AppendUint16(dst, math.MaxUint16) // -1
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(*r.clientID)))
		dst = append(dst, *r.clientID...)
	}
	if r.flexible {
		if r.rawTags != nil {
			dst = append(dst, r.rawTags...)
		} else {
			dst = append(dst, 0)
		}
	}
	dst = append(dst, r.body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// frame is the request without its size prefix, as ParseHeader sees it.
func (r testReq) frame() []byte { return r.appendTo(nil)[4:] }

func strp(s string) *string { return &s }

// uvarints encodes each value as a uvarint, back to back.
func uvarints(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// flexibleV2 is a Handler.Flexible for tests: version 2 and up of any key
// uses request header v2.
func flexibleV2(_, version int16) bool { return version >= 2 }

func TestParseHeader(t *testing.T) {
	t.Parallel()
	long := bytes.Repeat([]byte{'t'}, 200)
	tests := []struct {
		name     string
		frame    []byte
		flexible bool // what Handler.Flexible answers
		wantErr  bool
		want     Header // ClientID compared by content
		wantBody []byte
	}{
		{
			name:     "v1 with client id",
			frame:    testReq{key: 3, version: 1, corr: 7, clientID: strp("kgo"), body: []byte("abc")}.frame(),
			want:     Header{Key: 3, Version: 1, CorrelationID: 7, ClientID: []byte("kgo")},
			wantBody: []byte("abc"),
		},
		{
			name:     "v1 null client id",
			frame:    testReq{key: 1, version: 4, corr: -1, body: []byte("xy")}.frame(),
			want:     Header{Key: 1, Version: 4, CorrelationID: -1},
			wantBody: []byte("xy"),
		},
		{
			name:     "v1 empty client id",
			frame:    testReq{key: 1, version: 4, corr: 1, clientID: strp(""), body: []byte("xy")}.frame(),
			want:     Header{Key: 1, Version: 4, CorrelationID: 1},
			wantBody: []byte("xy"),
		},
		{
			name:  "v1 client id reaching the end of the frame",
			frame: testReq{key: 1, version: 4, corr: 1, clientID: strp("abcd")}.frame(),
			want:  Header{Key: 1, Version: 4, CorrelationID: 1, ClientID: []byte("abcd")},
		},
		{
			name:     "v1 keeps tag-like bytes in the body",
			frame:    testReq{key: 1, version: 1, corr: 1, body: []byte{0, 1, 2}}.frame(),
			want:     Header{Key: 1, Version: 1, CorrelationID: 1},
			wantBody: []byte{0, 1, 2},
		},
		{
			name:     "v2 empty tagged fields",
			frame:    testReq{key: 18, version: 3, corr: 9, clientID: strp("kgo"), flexible: true, body: []byte("body")}.frame(),
			flexible: true,
			want:     Header{Key: 18, Version: 3, CorrelationID: 9, ClientID: []byte("kgo"), Flexible: true},
			wantBody: []byte("body"),
		},
		{
			name: "v2 tagged fields with content are skipped",
			frame: testReq{key: 0, version: 9, corr: 2, clientID: strp("c"), flexible: true,
				rawTags: cat(uvarints(2, 0, 3), []byte("xyz"), uvarints(5, 0)), body: []byte("body")}.frame(),
			flexible: true,
			want:     Header{Key: 0, Version: 9, CorrelationID: 2, ClientID: []byte("c"), Flexible: true},
			wantBody: []byte("body"),
		},
		{
			name: "v2 multi-byte tag and size uvarints",
			frame: testReq{key: 0, version: 9, corr: 2, flexible: true,
				rawTags: cat(uvarints(1, 300, 200), long), body: []byte("b")}.frame(),
			flexible: true,
			want:     Header{Key: 0, Version: 9, CorrelationID: 2, Flexible: true},
			wantBody: []byte("b"),
		},
		{
			name:     "v2 header with no body",
			frame:    testReq{key: 60, version: 0, corr: 2, clientID: strp("c"), flexible: true}.frame(),
			flexible: true,
			want:     Header{Key: 60, Version: 0, CorrelationID: 2, ClientID: []byte("c"), Flexible: true},
		},
		{
			name: "v2 last field ends the frame",
			frame: testReq{key: 0, version: 9, corr: 2, flexible: true,
				rawTags: cat(uvarints(1, 0, 2), []byte("zz"))}.frame(),
			flexible: true,
			want:     Header{Key: 0, Version: 9, CorrelationID: 2, Flexible: true},
		},
		{name: "empty frame", frame: nil, wantErr: true},
		{name: "nine bytes", frame: testReq{key: 1}.frame()[:9], wantErr: true},
		{
			name:    "client id longer than frame",
			frame:   testReq{key: 1, version: 1, clientID: strp("abcd")}.frame()[:13],
			wantErr: true,
		},
		{
			name:    "client id length beyond a body-less frame",
			frame:   cat(testReq{key: 1}.frame()[:8], []byte{0x7f, 0xff}),
			wantErr: true,
		},
		{
			name:    "client id length -2",
			frame:   cat(testReq{key: 1}.frame()[:8], []byte{0xff, 0xfe}, []byte("body")),
			wantErr: true,
		},
		{
			name:    "client id length -32768",
			frame:   cat(testReq{key: 1}.frame()[:8], []byte{0x80, 0x00}, []byte("body")),
			wantErr: true,
		},
		{
			name:     "v2 missing tagged-field section",
			frame:    testReq{key: 0, version: 9, clientID: strp("c")}.frame(),
			flexible: true,
			wantErr:  true,
		},
		{
			name:     "v2 unterminated count uvarint",
			frame:    testReq{key: 0, version: 9, flexible: true, rawTags: []byte{0x80, 0x80}}.frame(),
			flexible: true,
			wantErr:  true,
		},
		{
			name: "v2 overflowing count uvarint",
			frame: testReq{key: 0, version: 9, flexible: true,
				rawTags: cat(bytes.Repeat([]byte{0xff}, 10), []byte{0x01})}.frame(),
			flexible: true,
			wantErr:  true,
		},
		{
			name:     "v2 count larger than the frame",
			frame:    testReq{key: 0, version: 9, flexible: true, rawTags: uvarints(5, 0, 0)}.frame(),
			flexible: true,
			wantErr:  true,
		},
		{
			name:     "v2 count promises a second field",
			frame:    testReq{key: 0, version: 9, flexible: true, rawTags: uvarints(2, 0, 0)}.frame(),
			flexible: true,
			wantErr:  true,
		},
		{
			name:     "v2 unterminated tag uvarint",
			frame:    testReq{key: 0, version: 9, flexible: true, rawTags: []byte{1, 0x80}}.frame(),
			flexible: true,
			wantErr:  true,
		},
		{
			name:     "v2 missing size",
			frame:    testReq{key: 0, version: 9, flexible: true, rawTags: uvarints(1, 0)}.frame(),
			flexible: true,
			wantErr:  true,
		},
		{
			name:     "v2 unterminated size uvarint",
			frame:    testReq{key: 0, version: 9, flexible: true, rawTags: []byte{1, 0, 0x80}}.frame(),
			flexible: true,
			wantErr:  true,
		},
		{
			name: "v2 truncated tagged field",
			frame: testReq{key: 0, version: 9, flexible: true,
				rawTags: cat(uvarints(1, 0, 10), []byte("abc"))}.frame(),
			flexible: true,
			wantErr:  true,
		},
		{
			name: "v2 tagged field size near 2^64",
			frame: testReq{key: 0, version: 9, flexible: true,
				rawTags: cat(uvarints(1, 0, math.MaxUint64), []byte("abc"))}.frame(),
			flexible: true,
			wantErr:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var gotKey, gotVersion int16
			calls := 0
			flexible := func(key, version int16) bool {
				calls++
				gotKey, gotVersion = key, version
				return tt.flexible
			}
			h, body, err := ParseHeader(tt.frame, flexible)
			if tt.wantErr {
				if !errors.Is(err, ErrFrameInvalid) {
					t.Fatalf("err = %v, want ErrFrameInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if calls != 1 || gotKey != tt.want.Key || gotVersion != tt.want.Version {
				t.Errorf("Flexible called %d times with (%d, %d), want once with (%d, %d)",
					calls, gotKey, gotVersion, tt.want.Key, tt.want.Version)
			}
			if h.Key != tt.want.Key || h.Version != tt.want.Version ||
				h.CorrelationID != tt.want.CorrelationID || h.Flexible != tt.want.Flexible {
				t.Errorf("header = %+v, want %+v", h, tt.want)
			}
			if !bytes.Equal(h.ClientID, tt.want.ClientID) {
				t.Errorf("client id = %q, want %q", h.ClientID, tt.want.ClientID)
			}
			if !bytes.Equal(body, tt.wantBody) {
				t.Errorf("body = %q, want %q", body, tt.wantBody)
			}
			// Both alias the frame: no copy on the hot path.
			if len(h.ClientID) > 0 && &h.ClientID[0] != &tt.frame[minFrame] {
				t.Error("client id does not alias the frame")
			}
			if len(body) > 0 && &body[0] != &tt.frame[len(tt.frame)-len(body)] {
				t.Error("body is not a suffix of the frame")
			}
		})
	}
}

func TestResponseFlexible(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key      int16
		flexible bool
		want     bool
	}{
		{key: 3, flexible: true, want: true},
		{key: 3, flexible: false, want: false},
		{key: apiVersionsKey, flexible: true, want: false}, // KIP-511
		{key: apiVersionsKey, flexible: false, want: false},
	}
	for _, tt := range tests {
		h := Header{Key: tt.key, Flexible: tt.flexible}
		if got := h.ResponseFlexible(); got != tt.want {
			t.Errorf("key %d flexible %v: ResponseFlexible = %v, want %v", tt.key, tt.flexible, got, tt.want)
		}
	}
}

// fakeInbound is the inbound side of a gnet.Conn over a byte slice. Like
// gnet, Peek and Next fail with io.ErrShortBuffer past the buffered bytes,
// and their results die at the next feed: feed poisons the old storage so
// a framer that keeps gnet's bytes reads garbage (STYLE.md item 9).
type fakeInbound struct {
	store   []byte // the whole backing array, poisoned at the next feed
	off     int    // bytes already taken by Next
	peekErr error
}

func (f *fakeInbound) feed(p []byte) {
	nb := make([]byte, 0, len(f.store)-f.off+len(p))
	nb = append(append(nb, f.store[f.off:]...), p...)
	for i := range f.store {
		f.store[i] = 0xa5
	}
	f.store, f.off = nb, 0
}

func (f *fakeInbound) InboundBuffered() int { return len(f.store) - f.off }

func (f *fakeInbound) Peek(n int) ([]byte, error) {
	if f.peekErr != nil {
		return nil, f.peekErr
	}
	if n > f.InboundBuffered() {
		return nil, io.ErrShortBuffer
	}
	return f.store[f.off : f.off+n : f.off+n], nil
}

func (f *fakeInbound) Next(n int) ([]byte, error) {
	if n > f.InboundBuffered() {
		return nil, io.ErrShortBuffer
	}
	p := f.store[f.off : f.off+n : f.off+n]
	f.off += n
	return p, nil
}

func TestFrameSize(t *testing.T) {
	t.Parallel()
	const maxSize = 1 << 20
	tests := []struct {
		name     string
		buffered []byte
		wantSize int
		wantOK   bool
		wantErr  error
	}{
		{name: "nothing buffered"},
		{name: "one byte", buffered: []byte{0}},
		{name: "three bytes", buffered: []byte{0, 0, 0}},
		{name: "three bytes of a huge size", buffered: []byte{0x7f, 0xff, 0xff}},
		{name: "exactly the minimum", buffered: be32(minFrame), wantSize: minFrame, wantOK: true},
		{name: "minimum with the frame buffered", buffered: testReq{key: 1}.appendTo(nil), wantSize: minFrame, wantOK: true},
		{name: "exactly max", buffered: be32(maxSize), wantSize: maxSize, wantOK: true},
		{name: "below minimum", buffered: be32(minFrame - 1), wantErr: ErrFrameInvalid},
		{name: "zero", buffered: be32(0), wantErr: ErrFrameInvalid},
		{name: "minus one", buffered: be32(-1), wantErr: ErrFrameInvalid},
		{name: "most negative", buffered: be32(math.MinInt32), wantErr: ErrFrameInvalid},
		{name: "one above max", buffered: be32(maxSize + 1), wantErr: ErrFrameTooLarge},
		{name: "max int32", buffered: be32(math.MaxInt32), wantErr: ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := &fakeInbound{}
			in.feed(tt.buffered)
			size, ok, err := frameSize(in, maxSize)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if size != tt.wantSize || ok != tt.wantOK {
				t.Errorf("frameSize = (%d, %v), want (%d, %v)", size, ok, tt.wantSize, tt.wantOK)
			}
			if in.InboundBuffered() != len(tt.buffered) {
				t.Errorf("frameSize consumed bytes: %d left of %d", in.InboundBuffered(), len(tt.buffered))
			}
		})
	}

	t.Run("peek error", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		in := &fakeInbound{peekErr: boom}
		in.feed(be32(minFrame))
		if _, ok, err := frameSize(in, maxSize); ok || !errors.Is(err, boom) {
			t.Fatalf("frameSize = (ok %v, err %v), want the Peek error", ok, err)
		}
	})
}

func TestFinishResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		corr     int32
		flexible bool
		body     []byte
		want     []byte
	}{
		{
			name: "header v0", corr: 7, body: []byte("hello"),
			want: cat(be32(4+5), be32(7), []byte("hello")),
		},
		{
			name: "header v1", corr: 7, flexible: true, body: []byte("hello"),
			want: cat(be32(4+1+5), be32(7), []byte{0}, []byte("hello")),
		},
		{
			name: "header v0 empty body", corr: 1,
			want: cat(be32(4), be32(1)),
		},
		{
			name: "header v1 empty body", corr: 1, flexible: true,
			want: cat(be32(5), be32(1), []byte{0}),
		},
		{
			name: "negative correlation id", corr: -2, flexible: true, body: []byte{9},
			want: []byte{0, 0, 0, 6, 0xff, 0xff, 0xff, 0xfe, 0, 9},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Dirty header room: finishResponse must write every byte it sends.
			buf := append(bytes.Repeat([]byte{0xee}, responseHeaderRoom), tt.body...)
			got := finishResponse(buf, tt.corr, tt.flexible, 0)
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("finishResponse = % x, want % x", got, tt.want)
			}
			if &got[len(got)-1] != &buf[len(buf)-1] {
				t.Error("finishResponse copied the response")
			}
		})
	}
}

// Hot-path primitives must not allocate (STYLE.md item 17).
func TestFramingNoAllocs(t *testing.T) {
	frame := testReq{key: 0, version: 9, corr: 5, clientID: strp("kgo"), flexible: true,
		rawTags: cat(uvarints(1, 0, 2), []byte("zz")), body: []byte("body")}.appendTo(nil)
	in := &fakeInbound{store: frame}
	resp := make([]byte, responseHeaderRoom, 64)
	resp = append(resp, "body"...)
	var sink int
	allocs := testing.AllocsPerRun(1000, func() {
		size, ok, err := frameSize(in, 1<<20)
		if !ok || err != nil {
			panic("frameSize failed")
		}
		h, body, err := ParseHeader(frame[4:4+size], flexibleV2)
		if err != nil {
			panic(err)
		}
		sink += len(body) + len(finishResponse(resp, h.CorrelationID, h.ResponseFlexible(), 0))
	})
	if allocs > 0 {
		t.Fatalf("framing allocates %.1f times per request", allocs)
	}
	_ = sink
}

// framer mirrors the framing half of (*Conn).readFrames without a server:
// on each delivery it moves every complete frame out of the inbound buffer
// and leaves a partial one there. After an error (the connection would be
// closed) it takes no more input.
type framer struct {
	in       fakeInbound
	maxSize  int32
	frames   [][]byte // copies, as readFrames copies into pooled buffers
	consumed int
	err      error
}

func (f *framer) deliver(p []byte) {
	if f.err != nil {
		return
	}
	f.in.feed(p)
	for {
		size, ok, err := frameSize(&f.in, f.maxSize)
		if err != nil {
			f.err = err
			return
		}
		if !ok || f.in.InboundBuffered() < 4+size {
			return
		}
		data, err := f.in.Next(4 + size)
		if err != nil {
			f.err = err
			return
		}
		f.frames = append(f.frames, bytes.Clone(data[4:]))
		f.consumed += 4 + size
	}
}

// frameChunks frames stream delivered in pieces of the given sizes (the
// rest of the stream goes in a last piece).
func frameChunks(stream []byte, maxSize int32, sizes ...int) *framer {
	f := &framer{maxSize: maxSize}
	for _, n := range sizes {
		n = min(n, len(stream))
		f.deliver(stream[:n])
		stream = stream[n:]
	}
	f.deliver(stream)
	return f
}

// sameFraming reports how two runs over the same stream differ, if they do.
func sameFraming(t *testing.T, whole, split *framer) {
	t.Helper()
	if len(whole.frames) != len(split.frames) {
		t.Fatalf("%d frames whole, %d split", len(whole.frames), len(split.frames))
	}
	for i := range whole.frames {
		if !bytes.Equal(whole.frames[i], split.frames[i]) {
			t.Fatalf("frame %d differs:\nwhole % x\nsplit % x", i, whole.frames[i], split.frames[i])
		}
	}
	if whole.consumed != split.consumed {
		t.Fatalf("consumed %d whole, %d split", whole.consumed, split.consumed)
	}
	if (whole.err == nil) != (split.err == nil) ||
		(whole.err != nil && whole.err.Error() != split.err.Error()) {
		t.Fatalf("err %v whole, %v split", whole.err, split.err)
	}
}

func TestFramerStream(t *testing.T) {
	t.Parallel()
	a := testReq{key: 18, version: 3, corr: 1, clientID: strp("kgo"), flexible: true, body: []byte{0}}
	b := testReq{key: 3, version: 1, corr: 2, body: bytes.Repeat([]byte{'m'}, 100)}
	c := testReq{key: 0, version: 9, corr: 3, clientID: strp(""), flexible: true,
		rawTags: cat(uvarints(1, 0, 1), []byte{7}), body: []byte("produce")}
	stream := c.appendTo(b.appendTo(a.appendTo(nil)))
	const maxSize = 1 << 10
	tests := []struct {
		name       string
		stream     []byte
		chunks     []int
		wantFrames [][]byte
		wantLeft   int
		wantErr    error
	}{
		{name: "three frames whole", stream: stream, wantFrames: [][]byte{a.frame(), b.frame(), c.frame()}},
		{name: "three frames in odd chunks", stream: stream, chunks: []int{1, 2, 3, 5, 8, 13, 21, 34},
			wantFrames: [][]byte{a.frame(), b.frame(), c.frame()}},
		{name: "size prefix split", stream: stream, chunks: []int{2}, wantFrames: [][]byte{a.frame(), b.frame(), c.frame()}},
		{name: "partial last frame stays buffered", stream: stream[:len(stream)-1],
			wantFrames: [][]byte{a.frame(), b.frame()}, wantLeft: len(c.frame()) + 3},
		{name: "partial size prefix stays buffered", stream: cat(a.appendTo(nil), []byte{0, 0}),
			wantFrames: [][]byte{a.frame()}, wantLeft: 2},
		{name: "frame too large after good frames", stream: cat(a.appendTo(nil), be32(maxSize+1), []byte("junk")),
			wantFrames: [][]byte{a.frame()}, wantLeft: 8, wantErr: ErrFrameTooLarge},
		{name: "negative size", stream: cat(be32(-1), a.appendTo(nil)), wantLeft: 4 + 4 + len(a.frame()), wantErr: ErrFrameInvalid},
		{name: "frame of exactly max", stream: cat(be32(maxSize), make([]byte, maxSize)),
			chunks: []int{3, 700}, wantFrames: [][]byte{make([]byte, maxSize)}},
		{name: "empty stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := frameChunks(tt.stream, maxSize, tt.chunks...)
			if !errors.Is(f.err, tt.wantErr) || (tt.wantErr == nil && f.err != nil) {
				t.Fatalf("err = %v, want %v", f.err, tt.wantErr)
			}
			if len(f.frames) != len(tt.wantFrames) {
				t.Fatalf("%d frames, want %d", len(f.frames), len(tt.wantFrames))
			}
			for i := range f.frames {
				if !bytes.Equal(f.frames[i], tt.wantFrames[i]) {
					t.Errorf("frame %d = % x, want % x", i, f.frames[i], tt.wantFrames[i])
				}
			}
			if left := f.in.InboundBuffered(); left != tt.wantLeft || f.consumed+left != len(tt.stream) {
				t.Errorf("%d bytes left buffered, %d consumed of %d; want %d left",
					left, f.consumed, len(tt.stream), tt.wantLeft)
			}
		})
	}
}
