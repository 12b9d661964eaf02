package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Coordinator key types.
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
)

// FindCoordinator: v0-6
//
// Behavior:
// One node coordinates everything: every group and transactional id maps
// to this node, on the listener the request came in on. The keys must be
// non-empty; share-group keys (type 2) and unknown types are INVALID_REQUEST.
// librdkafka also uses FindCoordinator v0 being advertised to decide that
// the broker supports lz4, so this answer matters even to producers.
//
// Authorization: a group key needs DESCRIBE on the group, else
// GROUP_AUTHORIZATION_FAILED; a transactional id DESCRIBE on it, else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (per key from v4), checked after
// the key type and before the key itself.
//
// Version notes:
// v1 adds the key type and error message, v3 flexible, v4 batched keys
// (KIP-699: one result per key, no top-level fields).
func init() { regKey(10, 0, 6, (*Broker).handleFindCoordinator) }

func (b *Broker) handleFindCoordinator(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	adv := b.advertisedFor(r.conn.Listener())
	az := b.authz(r)
	answer := func(key string) (code int16, msg *string) {
		denied := az.coordinatorDenied(req.CoordinatorType, key)
		switch {
		case req.CoordinatorType != coordinatorGroup && req.CoordinatorType != coordinatorTransaction:
			m := "kmirror coordinates consumer groups and transactions only"
			return kerr.InvalidRequest.Code, &m
		case denied != nil:
			return authzFailure(denied)
		case key == "":
			m := "the coordinator key is empty"
			return kerr.InvalidRequest.Code, &m
		}
		return 0, nil
	}
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = answer(req.CoordinatorKey)
		resp.NodeID, resp.Host, resp.Port = b.cfg.NodeID, adv.Host, int32(adv.Port)
		if resp.ErrorCode != 0 {
			resp.NodeID, resp.Host, resp.Port = -1, "", -1
		}
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode, c.ErrorMessage = answer(key)
		c.NodeID, c.Host, c.Port = b.cfg.NodeID, adv.Host, int32(adv.Port)
		if c.ErrorCode != 0 {
			c.NodeID, c.Host, c.Port = -1, "", -1
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}
