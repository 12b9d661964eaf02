package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Framing errors. Any of them closes the connection that sent the frame.
var (
	ErrFrameTooLarge = errors.New("netio: request frame larger than socket.request.max.bytes")
	ErrFrameInvalid  = errors.New("netio: malformed request frame")
)

// minFrame is the smallest request: api key, api version, correlation id and
// a client id length (request header v1).
const minFrame = 2 + 2 + 4 + 2

// inbound is the part of gnet.Conn the framer needs. Tests feed it split
// input to prove the framer resumes across partial deliveries.
type inbound interface {
	Peek(n int) ([]byte, error)
	Next(n int) ([]byte, error)
	InboundBuffered() int
}

// frameSize reads the size prefix of the next frame, if 4 bytes are there.
// It returns ok=false when fewer than 4 bytes are buffered.
func frameSize(in inbound, maxSize int32) (size int, ok bool, err error) {
	if in.InboundBuffered() < 4 {
		return 0, false, nil
	}
	p, err := in.Peek(4)
	if err != nil {
		return 0, false, err
	}
	size, err = checkFrameSize(p, maxSize)
	return size, err == nil, err
}

// checkFrameSize decodes a 4-byte size prefix and rejects sizes over
// maxSize or below the smallest request header, before anything is
// allocated for the frame (STYLE.md item 10). Both transports use it.
func checkFrameSize(p []byte, maxSize int32) (int, error) {
	n := int32(binary.BigEndian.Uint32(p))
	switch {
	case n > maxSize:
		return 0, fmt.Errorf("%w: %d > %d bytes", ErrFrameTooLarge, n, maxSize)
	case n < minFrame:
		return 0, fmt.Errorf("%w: size %d is below the %d-byte minimum header", ErrFrameInvalid, n, minFrame)
	}
	return int(n), nil
}

// Header is a parsed request header (v1 or v2; v0 is only ControlledShutdown
// v0, which nobody sends any more).
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID aliases the request buffer; copy it to keep it.
	ClientID []byte
	// Flexible is true for request header v2 (tagged fields present), so
	// the response header is v1, except for ApiVersions (KIP-511: its
	// response header is always v0 so any client can read the versions).
	Flexible bool
}

// ResponseFlexible reports whether the response carries header v1 (an
// empty tagged-field section after the correlation id).
func (h *Header) ResponseFlexible() bool { return h.Flexible && h.Key != apiVersionsKey }

const apiVersionsKey = 18

// ParseHeader splits a frame (without its size prefix) into header and body.
// flexible reports whether a key and version use request header v2; for
// keys or versions it does not know it must answer false, so the body of
// such a request starts after the client id and the handler can answer
// with Kafka's error for it.
func ParseHeader(frame []byte, flexible func(key, version int16) bool) (Header, []byte, error) {
	var h Header
	if len(frame) < minFrame {
		return h, nil, fmt.Errorf("%w: %d-byte header", ErrFrameInvalid, len(frame))
	}
	h.Key = int16(binary.BigEndian.Uint16(frame))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	n := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[minFrame:]
	switch {
	case n < -1:
		return h, nil, fmt.Errorf("%w: client id length %d", ErrFrameInvalid, n)
	case n > 0:
		if int(n) > len(rest) {
			return h, nil, fmt.Errorf("%w: client id length %d beyond the frame", ErrFrameInvalid, n)
		}
		h.ClientID, rest = rest[:n], rest[n:]
	}
	if h.Flexible = flexible(h.Key, h.Version); h.Flexible {
		var err error
		if rest, err = skipTaggedFields(rest); err != nil {
			return h, nil, err
		}
	}
	return h, rest, nil
}

// skipTaggedFields skips a tagged-field section: a count, then per field a
// tag, a size and that many bytes. No header tag is defined for requests
// today, so their contents are ignored, as Kafka ignores unknown tags.
func skipTaggedFields(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad tagged-field count", ErrFrameInvalid)
	}
	b = b[n:]
	for range count {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, fmt.Errorf("%w: bad tag", ErrFrameInvalid)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: tagged field size beyond the frame", ErrFrameInvalid)
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// responseHeaderRoom is the space a response buffer reserves in front of the
// body: size (4), correlation id (4) and an empty tagged-field section (1).
const responseHeaderRoom = 9

// finishResponse writes the header in front of the body appended after
// responseHeaderRoom and returns the bytes to send. spliced is the number of
// file bytes sent between the buffer's bytes (see Splice).
func finishResponse(buf []byte, correlationID int32, flexible bool, spliced int64) []byte {
	start := 1
	if flexible {
		start = 0
		buf[8] = 0 // no tagged fields
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(int64(len(buf)-start-4)+spliced))
	binary.BigEndian.PutUint32(buf[start+4:], uint32(correlationID))
	return buf[start:]
}

var errPipelinedTooMuch = errors.New("netio: client pipelined more than two maximum-size requests without reading responses")
