package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// Coordinator key types.
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
)

// FindCoordinator: v0-6
//
// Behavior:
// The coordinator of a key is the metadata image's (meta.Image.Coordinator),
// on its listener named like the one the request came in on: for a group,
// the leader of its partition of __consumer_offsets, which the first
// group FindCoordinator creates (COORDINATOR_NOT_AVAILABLE while it cannot
// be; group_log.go); for a transactional id, the leader of its partition
// of __transaction_state, which the first transactional FindCoordinator
// creates (txn_log.go). A coordinator the image does not know is
// COORDINATOR_NOT_AVAILABLE. The keys must be
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
	im := b.image()
	az := b.authz(r)
	answer := func(key string) (code int16, msg *string, node int32, host string, port int32) {
		code, msg = b.coordinatorCheck(&az, req.CoordinatorType, key)
		if code != 0 {
			return code, msg, -1, "", -1
		}
		kind := meta.CoordinatorKind(req.CoordinatorType)
		if !b.coordinatorTopicReady(kind) {
			return kerr.CoordinatorNotAvailable.Code, nil, -1, "", -1
		}
		if im.Topic(coordinatorTopic(kind)) == nil {
			im = b.image() // created just now
		}
		c, ok := im.Coordinator(kind, key)
		l, lok := meta.Listener{}, false
		if ok {
			l, lok = c.Listener(r.conn.Listener())
		}
		if !lok {
			return kerr.CoordinatorNotAvailable.Code, nil, -1, "", -1
		}
		return 0, nil, c.ID, l.Host, l.Port
	}
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = answer(req.CoordinatorKey)
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port = answer(key)
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}

// coordinatorCheck answers a key that cannot be looked up: an unknown key
// type, a key the sender may not DESCRIBE, an empty key.
func (b *Broker) coordinatorCheck(az *authzCtx, kind int8, key string) (code int16, msg *string) {
	denied := az.coordinatorDenied(kind, key)
	switch {
	case kind != coordinatorGroup && kind != coordinatorTransaction:
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

// coordinatorTopic is the internal topic of a coordinator kind.
func coordinatorTopic(kind meta.CoordinatorKind) string {
	if kind == meta.CoordinatorGroup {
		return meta.GroupTopic
	}
	return meta.TransactionTopic
}
