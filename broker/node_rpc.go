package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetch"
)

// askNode sends req to node id on its inter-broker listener, on a
// connection of its own, at the highest version both sides serve up to
// req's, and returns the answer. It is for the requests one node makes of
// another now and then (a Describe fan-out, a group sync's commit at its
// coordinator); the replica fetchers and the controller channel keep
// their own connections.
func (b *Broker) askNode(ctx context.Context, id int32, clientID string, timeout time.Duration, req kmsg.Request) (kmsg.Response, error) {
	addr, ok := b.leaderAddr(id)
	if !ok {
		return nil, fmt.Errorf("node %d has no %s listener", id, b.cfg.InterBrokerListener().Name)
	}
	conn, err := fetch.DialConn(ctx, addr, fetch.ConnConfig{ClientID: clientID, RequestTimeout: timeout,
		TLS: interBrokerTLS(b.cfg)})
	if err != nil {
		return nil, fmt.Errorf("node %d at %s: %w", id, addr, err)
	}
	defer conn.Close()
	v := conn.Version(kmsg.Key(req.Key()), 0, req.GetVersion())
	if v < 0 {
		return nil, fmt.Errorf("node %d serves no version of request key %d", id, req.Key())
	}
	req.SetVersion(v)
	resp := req.ResponseKind()
	if err := conn.RoundTrip(ctx, req, resp); err != nil {
		return nil, fmt.Errorf("node %d at %s: %w", id, addr, err)
	}
	return resp, nil
}
