package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The metadata log's RPCs on the CONTROLLER listener: a broker-only node
// (an observer of the log) fetches the committed entries with Fetch of
// __cluster_metadata and, when it misses entries compacted away, the
// latest snapshot with FetchSnapshot, as KRaft's brokers do
// (meta/metadata_fetch.go holds the wire format and the controller's
// answers). Fetch on any other listener is the clients' Fetch (01_fetch.go).
// Both need CLUSTER_ACTION on the cluster (the sender is a broker of the
// cluster), else CLUSTER_AUTHORIZATION_FAILED.

// MetadataLogServer is the node's metadata log as the CONTROLLER
// listener serves it (*meta.MetadataLog).
type MetadataLogServer interface {
	ServeFetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse
	ServeFetchSnapshot(req *kmsg.FetchSnapshotRequest) *kmsg.FetchSnapshotResponse
}

// FetchSnapshot: v0-1
//
// Behavior: the chunk of the controller's latest metadata snapshot from
// the position asked (meta.MetadataLog.ServeFetchSnapshot); served on the
// CONTROLLER listener only.
//
// Version notes: v1 adds the replica's directory id (unused).
func init() { regKey(fetchSnapshotKey, 0, 1, (*Broker).handleFetchSnapshot) }

const fetchSnapshotKey = 59

func (b *Broker) handleFetchSnapshot(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.FetchSnapshotRequest)
	resp := req.ResponseKind().(*kmsg.FetchSnapshotResponse)
	switch az := b.authz(r); {
	case !az.cluster(aclOperationClusterAction):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case b.cfg.MetadataLog == nil:
		resp.ErrorCode = kerr.NotController.Code
	default:
		return b.cfg.MetadataLog.ServeFetchSnapshot(req), nil
	}
	return resp, nil
}

// handleMetadataLogFetch is Fetch on the CONTROLLER listener. Its
// refusals are per partition: Fetch has a top-level error code from v7
// only.
func (b *Broker) handleMetadataLogFetch(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.FetchRequest)
	switch az := b.authz(r); {
	case !az.cluster(aclOperationClusterAction):
		return fetchRefused(req, kerr.ClusterAuthorizationFailed.Code), nil
	case b.cfg.MetadataLog == nil:
		return fetchRefused(req, kerr.NotLeaderForPartition.Code), nil
	default:
		// The long poll ends when the broker closes.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-b.closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		// The long poll is not request-handling time (quota_throttle.go).
		start := time.Now()
		resp := b.cfg.MetadataLog.ServeFetch(ctx, req)
		r.parked += time.Since(start)
		return resp, nil
	}
}

// fetchRefused answers every partition of req with code.
func fetchRefused(req *kmsg.FetchRequest, code int16) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.HighWatermark = rp.Partition, code, -1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
