package broker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/netio"
)

// request is one decoded request on its way through a handler.
type request struct {
	conn *netio.Conn
	hdr  *netio.Header
	kreq kmsg.Request
	// out is the pooled response buffer, header room reserved. Handlers
	// that encode by hand (Fetch) append to it and set raw.
	out []byte
	raw bool
	// noResponse suppresses the response (Produce with acks=0).
	noResponse bool
	// parked is how long the handler waited for something else (a Fetch
	// long poll): not counted as request time by request_percentage.
	parked time.Duration
	// fwd is the client of a request that came in an Envelope (its
	// principal and address on the node that forwarded it), nil for a
	// request of conn's own client. conn is then the forwarding node's.
	fwd *forwardedIdentity
}

// handlerFunc serves one API key. It returns the response, or nil with
// r.raw or r.noResponse set. An error closes the connection.
type handlerFunc func(b *Broker, r *request) (kmsg.Response, error)

// apiHandler is a registered API key and the versions served.
type apiHandler struct {
	min, max int16
	serve    handlerFunc
}

// maxAPIKey bounds the handler table (the mirror RPCs end at 107).
const maxAPIKey = 128

var handlers [maxAPIKey]*apiHandler

// regKey registers a handler; called from each handler file's init.
func regKey(key, min, max int16, serve handlerFunc) {
	if handlers[key] != nil {
		panic(fmt.Sprintf("BUG: API key %d registered twice", key))
	}
	if r := requestForKey(key); r != nil && max > r.MaxVersion() {
		panic(fmt.Sprintf("BUG: API key %d v%d is beyond what kmsg knows (v%d)", key, max, r.MaxVersion()))
	}
	handlers[key] = &apiHandler{min: min, max: max, serve: serve}
}

func lookupHandler(key, version int16) (*apiHandler, bool) {
	if key < 0 || int(key) >= len(handlers) || handlers[key] == nil {
		return nil, false
	}
	h := handlers[key]
	return h, version >= h.min && version <= h.max
}

// Flexible implements netio.Handler: request header v2 for the flexible
// versions of the keys served.
func (b *Broker) Flexible(key, version int16) bool { return flexibleVersion(key, version) }

func flexibleVersion(key, version int16) bool {
	if _, ok := lookupHandler(key, version); !ok {
		return false
	}
	r := requestForKey(key)
	r.SetVersion(version)
	return r.IsFlexible()
}

// errUnsupported closes connections that send what Kafka would refuse the
// same way.
var errUnsupported = errors.New("unsupported API key or version")

// errTruncatedRequest replaces the decoders' "response did not contain
// enough data" (kbin's words, written for a client reading responses):
// here it is a client's request that ends before its fields do.
var errTruncatedRequest = errors.New("the request ends before its fields do (truncated or malformed)")

// kmsgShort is the error kmsg's decoders return for a body that ends too
// early: a sentinel of kmsg's internal copy of kbin, so it is taken from
// a decode of an empty body rather than named.
var kmsgShort = kmsg.NewPtrMetadataRequest().ReadFrom(nil)

// decodeRequest decodes a request body of a registered key and version.
func decodeRequest(key, version int16, body []byte) (kmsg.Request, error) {
	kreq := requestForKey(key)
	kreq.SetVersion(version)
	if err := kreq.ReadFrom(body); err != nil {
		if errors.Is(err, kbin.ErrNotEnoughData) || (kmsgShort != nil && errors.Is(err, kmsgShort)) {
			err = errTruncatedRequest
		}
		return nil, fmt.Errorf("decoding a %s v%d request: %w", nameForKey(key), version, err)
	}
	return kreq, nil
}

// errClosing closes a connection whose request arrived before the broker
// served anything and stayed until it closed.
var errClosing = errors.New("broker: closing before serving")

// Serve implements netio.Handler.
func (b *Broker) Serve(c *netio.Conn, hdr *netio.Header, body []byte, out []byte) ([]byte, bool, error) {
	select {
	case <-b.ready:
	case <-b.closing:
		return out, false, errClosing // closed before it served anything
	}
	scope := b.scope(c)
	if !scope.serves(hdr.Key) {
		// Before lookupHandler: a key outside the listener's scope is
		// refused whatever its version (controller_listener.go).
		return out, false, errNotInScope(hdr.Key, hdr.Version, c.Listener())
	}
	h, ok := lookupHandler(hdr.Key, hdr.Version)
	if !ok {
		if hdr.Key == apiVersionsKey {
			// KIP-511: a client newer than us gets v0 with our ranges.
			return b.apiVersionsFallback(out, scope), true, nil
		}
		return out, false, fmt.Errorf("%w: key %d (%s) v%d", errUnsupported, hdr.Key, nameForKey(hdr.Key), hdr.Version)
	}
	if strings.HasPrefix(b.listenerProtocol(c.Listener()), "SASL_") {
		if err := b.saslGate(connState(c), hdr.Key, len(body)); err != nil {
			return out, false, err
		}
	}
	b.stats.Requests[hdr.Key].Add(1)
	kreq, err := decodeRequest(hdr.Key, hdr.Version, body)
	if err != nil {
		return out, false, err
	}
	r := &request{conn: c, hdr: hdr, kreq: kreq, out: out}
	// One atomic load when no quota is set (quotas.go).
	quotasOn := b.quotas.on.Load()
	var start time.Time
	if quotasOn {
		start = time.Now()
	}
	var resp kmsg.Response
	if b.forwards(hdr.Key) {
		resp, err = b.forward(r, body) // the controller's handler answers (forward.go)
	} else {
		resp, err = h.serve(b, r)
	}
	if err != nil {
		return r.out, false, err
	}
	if quotasOn {
		b.throttle(r, resp, start, len(out), len(body))
	}
	switch {
	case r.noResponse:
		return r.out, false, nil
	case r.raw:
		return r.out, true, nil
	case resp == nil:
		panic(fmt.Sprintf("BUG: %s handler returned no response", nameForKey(hdr.Key)))
	}
	resp.SetVersion(hdr.Version)
	return resp.AppendTo(r.out), true, nil
}

const apiVersionsKey = 18

// errCode returns the Kafka code of a kerr error (0 for nil).
func errCode(err *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	return err.Code
}
