package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// Heartbeat: v0-4
//
// Behavior:
// Keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.
//
// Version notes:
// v3 static members; v4 flexible.
func init() { regKey(12, 0, 4, (*Broker).handleHeartbeat) }

func (b *Broker) handleHeartbeat(r *request) (kmsg.Response, error) {
	return b.groups.Heartbeat(r.kreq.(*kmsg.HeartbeatRequest)), nil
}
