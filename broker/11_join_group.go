package broker

import (
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup: v0-9
//
// Behavior:
// The group coordinator (group/) adds the member and runs the rebalance;
// the request waits for it on this connection's worker, as Kafka parks a
// join until the group is ready. A new dynamic member gets
// MEMBER_ID_REQUIRED first (v4+, KIP-394); static members (v5+, KIP-345)
// rejoin without a rebalance when nothing changed.
//
// Version notes:
// v1 rebalance timeout; v4 member id required; v5 static members; v6
// flexible; v7 protocol type in the response; v8 reasons; v9 skip
// assignment for a static leader.
func init() { regKey(11, 0, 9, (*Broker).handleJoinGroup) }

func (b *Broker) handleJoinGroup(r *request) (kmsg.Response, error) {
	host := r.conn.RemoteAddr()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	// Kafka reports the client host as InetAddress.toString: "/1.2.3.4".
	return b.groups.JoinGroup(r.kreq.(*kmsg.JoinGroupRequest), string(r.hdr.ClientID), "/"+host), nil
}
