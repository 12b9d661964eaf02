package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirrorapi"
)

// ControllerChannel sends Kafka requests to the current controller over
// its CONTROLLER listener, as Kafka's NodeToControllerChannelManager
// does for broker registration, heartbeats and forwarded requests. The
// controller is whichever voter the metadata log names (leader, from
// MetadataLog.Controller); its address is its controller.quorum.voters
// entry.
//
// One kgo client per voter is kept (created on first use, closed by
// Close), each seeded with that voter's address only: kgo keeps its
// connection and negotiates versions from the listener's ApiVersions.
// A key the controller's listener does not advertise fails at once with
// ErrControllerUnsupported, without being sent: the listener would close
// the connection (as Kafka's does), which cannot be told from a broken
// one, and the request would be retried until ctx ends.
type ControllerChannel struct {
	voters []Voter
	leader func() (int32, bool)
	// minBackoff and maxBackoff bound the wait between attempts while no
	// controller is known or it cannot be reached. The bound is short:
	// an election takes about a second, and a request that waits longer
	// than it must after one is a client's failover time
	// (BENCHMARKS.md "cluster: the metadata quorum").
	minBackoff, maxBackoff time.Duration
	// readTimeout is kgo's wait for an answer on the channel's
	// connections (channelReadTimeout; tests shorten it).
	readTimeout time.Duration

	mu      sync.Mutex
	clients map[int32]*voterClient
	closed  bool
}

// voterClient is the client of one voter and the API keys its
// CONTROLLER listener advertised (nil until asked, and again after a
// connection error: the node may have restarted with other versions).
type voterClient struct {
	cl   *kgo.Client
	keys map[int16]bool
}

// ErrChannelClosed is returned by Request after Close.
var ErrChannelClosed = errors.New("meta: controller channel closed")

// ErrControllerUnsupported is returned for a request whose key the
// controller's listener does not advertise.
var ErrControllerUnsupported = errors.New("meta: the controller listener does not serve this request")

// channelReadTimeout is how long the channel waits for an answer on its
// connection: longer than any caller's ctx (a forward's is 30 s), so the
// caller alone bounds a request. kgo's default, 10 s for the requests
// that carry no timeout of their own (the mirror RPCs, Envelope), cut
// off a forwarded failover that took 11 s to answer, and the channel
// sent it again: the second stop found its topic stopped already and
// answered that, and the first one's report was lost.
const channelReadTimeout = 2 * time.Minute

// errNoController is the wait's reason while no controller is known.
var errNoController = errors.New("no controller is elected")

// NewControllerChannel is a channel to the controller among voters,
// which leader names (false while an election runs).
func NewControllerChannel(voters []Voter, leader func() (int32, bool)) *ControllerChannel {
	return &ControllerChannel{
		voters: voters, leader: leader,
		minBackoff: 20 * time.Millisecond, maxBackoff: 100 * time.Millisecond,
		readTimeout: channelReadTimeout,
		clients:     map[int32]*voterClient{},
	}
}

// Request sends req to the controller and returns its response. While no
// controller is known, or the controller cannot be reached (a refused or
// broken connection: an election may be moving it), it waits and tries
// again, asking leader again each time, until ctx ends. Other failures
// are returned at once. A request sent on a connection that broke may
// have been served: callers that retry past an error must be idempotent.
func (ch *ControllerChannel) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var backoff time.Duration
	for {
		resp, err := ch.try(ctx, req)
		if err == nil {
			return resp, nil
		}
		if !errors.Is(err, errNoController) && !isConnectionError(err) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("meta: controller channel: %w (last: %v)", ctx.Err(), err)
		}
		backoff = min(max(2*backoff, ch.minBackoff), ch.maxBackoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("meta: controller channel: %w (last: %v)", ctx.Err(), err)
		}
	}
}

// try sends req once to the controller leader names.
func (ch *ControllerChannel) try(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	id, ok := ch.leader()
	if !ok {
		return nil, errNoController
	}
	vc, err := ch.client(id)
	if err != nil {
		return nil, err
	}
	keys, err := ch.advertised(ctx, id, vc)
	if err != nil {
		return nil, err
	}
	if !keys[req.Key()] {
		return nil, fmt.Errorf("%w: %s (key %d) on node %d", ErrControllerUnsupported, kmsg.NameForKey(req.Key()), req.Key(), id)
	}
	resp, err := vc.cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, ch.failed(id, vc, err)
	}
	return resp, nil
}

// advertised is the keys vc's listener advertises, asked once per
// connection.
func (ch *ControllerChannel) advertised(ctx context.Context, id int32, vc *voterClient) (map[int16]bool, error) {
	ch.mu.Lock()
	keys := vc.keys
	ch.mu.Unlock()
	if keys != nil {
		return keys, nil
	}
	// Named as kgo names itself: Kafka's listeners (and kfake) refuse
	// an ApiVersions v3+ without a client software name.
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kmirror", "1"
	resp, err := vc.cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, ch.failed(id, vc, err)
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(av.ErrorCode); err != nil {
		return nil, fmt.Errorf("meta: controller channel: node %d refused ApiVersions: %w", id, err)
	}
	keys = map[int16]bool{}
	for _, k := range av.ApiKeys {
		keys[k.ApiKey] = true
	}
	ch.mu.Lock()
	vc.keys = keys
	ch.mu.Unlock()
	return keys, nil
}

// failed names the node in a request's error, and forgets what vc's
// listener advertised after a connection error.
func (ch *ControllerChannel) failed(id int32, vc *voterClient, err error) error {
	if errors.Is(err, kgo.ErrClientClosed) {
		return ErrChannelClosed
	}
	if isConnectionError(err) {
		ch.mu.Lock()
		vc.keys = nil
		ch.mu.Unlock()
	}
	return fmt.Errorf("meta: controller channel: node %d: %w", id, err)
}

// client is the kgo client of voter id, created on first use. A
// controller id that is not among the voters (the log's voters and the
// setting differ, see warnChangedVoters) waits like an unknown
// controller.
func (ch *ControllerChannel) client(id int32) (*voterClient, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return nil, ErrChannelClosed
	}
	if vc := ch.clients[id]; vc != nil {
		return vc, nil
	}
	for _, v := range ch.voters {
		if v.ID != id {
			continue
		}
		// The mirror keys too: kgo refuses a key its version table lacks
		// (BumpLeaderEpochs, 105).
		cl, err := kgo.NewClient(kgo.SeedBrokers(v.Addr), kgo.ClientID("kmirror-controller-channel"),
			kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)), kgo.RequestTimeoutOverhead(ch.readTimeout))
		if err != nil {
			return nil, fmt.Errorf("meta: controller channel: node %d at %s: %w", id, v.Addr, err)
		}
		vc := &voterClient{cl: cl}
		ch.clients[id] = vc
		return vc, nil
	}
	return nil, fmt.Errorf("%w: the controller, node %d, is not in controller.quorum.voters", errNoController, id)
}

// Close closes the clients; Requests under way fail with
// ErrChannelClosed. Calling it again does nothing.
func (ch *ControllerChannel) Close() {
	ch.mu.Lock()
	clients := ch.clients
	ch.clients, ch.closed = nil, true
	ch.mu.Unlock()
	for _, vc := range clients {
		vc.cl.Close()
	}
}

// isConnectionError reports whether err says the controller could not be
// reached or the connection broke, which another attempt may not meet.
// A timeout is one only while dialing: a request whose answer timed out
// was sent, and may be being served (a forwarded stop, a topic
// creation); sending it again would serve it twice.
func isConnectionError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		var oe *net.OpError
		return errors.As(err, &oe) && oe.Op == "dial"
	}
	var eof *kgo.ErrFirstReadEOF
	return errors.As(err, &ne) || errors.As(err, &eof) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
