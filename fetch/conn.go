package fetch

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Conn is one raw connection to a Kafka broker, opened the way the mirror
// fetchers open theirs (TLS, ApiVersions, SASL), for tools that read a
// cluster's logs as the fetchers do: `kmirror mirrors --verify` (package
// verify). Each response is read into the connection's one reused buffer,
// where a kgo client allocates a buffer per response. Not safe for
// concurrent use.
type Conn struct{ c *sourceConn }

// ConnConfig configures a Conn. Zero values take the fetchers' defaults
// (request timeout 30 s, dial timeout 10 s, no TLS, no SASL).
type ConnConfig struct {
	ClientID       string
	RequestTimeout time.Duration
	TLS            *tls.Config
	SASL           sasl.Mechanism
}

// DialConn connects to addr and negotiates versions and authentication.
func DialConn(ctx context.Context, addr string, cfg ConnConfig) (*Conn, error) {
	c, err := dialSource(ctx, addr, sourceConnConfig{ClientID: cfg.ClientID, RequestTimeout: cfg.RequestTimeout,
		TLS: cfg.TLS, SASL: cfg.SASL})
	if err != nil {
		return nil, err
	}
	return &Conn{c: c}, nil
}

// Version is the highest version of key that the broker and kmsg both
// support within [minVer, maxVer], or -1 when there is none.
func (c *Conn) Version(key kmsg.Key, minVer, maxVer int16) int16 {
	return c.c.version(int16(key), minVer, maxVer)
}

// RoundTrip sends req (its version set) and decodes the answer into resp.
// Byte fields of resp (a Fetch response's RecordBatches) alias the
// connection's buffer until the next RoundTrip or Close. Any error closes
// the connection.
func (c *Conn) RoundTrip(ctx context.Context, req kmsg.Request, resp kmsg.Response) error {
	return c.c.roundTrip(ctx, req, resp)
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }
