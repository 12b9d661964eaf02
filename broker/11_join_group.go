package broker

import (
	"net"

	"github.com/kmirror/kmirror/meta"
	"github.com/twmb/franz-go/pkg/kerr"
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
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED and
// the group is not touched.
//
// Version notes:
// v1 rebalance timeout; v4 member id required; v5 static members; v6
// flexible; v7 protocol type in the response; v8 reasons; v9 skip
// assignment for a static leader.
func init() { regKey(joinGroupKey, 0, 9, (*Broker).handleJoinGroup) }

const joinGroupKey = 11

func (b *Broker) handleJoinGroup(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.JoinGroupRequest)
	if az := b.authz(r); !az.group(aclOperationRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if code := b.coordinatorError(meta.CoordinatorGroup, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	host := r.conn.RemoteAddr()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	// Kafka reports the client host as InetAddress.toString: "/1.2.3.4".
	return b.groups.JoinGroup(req, string(r.hdr.ClientID), "/"+host), nil
}
