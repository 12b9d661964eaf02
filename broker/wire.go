package broker

import (
	"encoding/binary"
	"net"

	"github.com/kmirror/kmirror/netio"
)

// Append encoders for the responses encoded by hand (Fetch). They follow
// Kafka's wire primitives; "flexible" selects the compact forms of KIP-482.

func appendI16(dst []byte, v int16) []byte { return binary.BigEndian.AppendUint16(dst, uint16(v)) }
func appendI32(dst []byte, v int32) []byte { return binary.BigEndian.AppendUint32(dst, uint32(v)) }
func appendI64(dst []byte, v int64) []byte { return binary.BigEndian.AppendUint64(dst, uint64(v)) }

func appendUvarint(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }

// appendArrayLen writes an array length; n < 0 is a null array.
func appendArrayLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return appendUvarint(dst, uint64(n+1))
	}
	return appendI32(dst, int32(n))
}

// appendString writes a non-null string.
func appendString(dst []byte, s string, flexible bool) []byte {
	if flexible {
		dst = appendUvarint(dst, uint64(len(s)+1))
	} else {
		dst = appendI16(dst, int16(len(s)))
	}
	return append(dst, s...)
}

// appendBytesLen writes the length of a non-null bytes field.
func appendBytesLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return appendUvarint(dst, uint64(n+1))
	}
	return appendI32(dst, int32(n))
}

// uvarintLen is the encoded size of v.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// connScratch is per-connection state the handlers reuse between requests
// of one connection (which never overlap).
type connScratch struct {
	fetch *fetchScratch
	// principal is who the connection authenticated as ("User:alice";
	// "User:ANONYMOUS" on PLAINTEXT listeners), set by SASL or from the
	// TLS client certificate.
	principal string
	sasl      saslState
}

func connState(c *netio.Conn) *connScratch {
	if cs, ok := c.Context.(*connScratch); ok {
		return cs
	}
	cs := &connScratch{principal: anonymousPrincipal}
	if st := c.TLS(); st != nil && len(st.PeerCertificates) > 0 {
		// Kafka's default principal builder on SSL listeners: the client
		// certificate's distinguished name. SASL_SSL replaces it with
		// the SASL user once authenticated.
		cs.principal = "User:" + st.PeerCertificates[0].Subject.String()
	}
	c.Context = cs
	return cs
}

// anonymousPrincipal is Kafka's principal of unauthenticated connections.
const anonymousPrincipal = "User:ANONYMOUS"

// forwardedIdentity is the client of a forwarded request, as the Envelope
// names it: its principal ("User:alice") and its address without the port.
type forwardedIdentity struct {
	principal, host string
}

// principal is who sent r, as ACLs name principals.
func (r *request) principal() string {
	if r.fwd != nil {
		return r.fwd.principal
	}
	return connState(r.conn).principal
}

// host is the client's address without the port, as ACLs name hosts.
func (r *request) host() string {
	if r.fwd != nil {
		return r.fwd.host
	}
	h, _, err := net.SplitHostPort(r.conn.RemoteAddr())
	if err != nil {
		return r.conn.RemoteAddr()
	}
	return h
}
