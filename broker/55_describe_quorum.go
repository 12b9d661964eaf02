package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// DescribeQuorum: v0-2
//
// Behavior:
// The quorum of the node's metadata log (meta.MetadataLog.Quorum), as
// Kafka's KRaft answers it for partition 0 of __cluster_metadata: the
// leader (the controller) and its epoch (Raft's term), the high watermark
// (the commit index), and each voter's log end offset with when it was
// last heard from (the controller knows them from the heartbeats; -1
// where unknown). A node that is not the controller asks the controller,
// as Kafka's brokers forward the request (REQUEST_TIMED_OUT when it
// cannot be reached). A node alone is a one-voter quorum, so
// `kafka-metadata-quorum.sh describe --status` and `--replication` show
// it. Another topic or
// partition answers UNKNOWN_TOPIC_OR_PARTITION, as Kafka does; a broker
// without a metadata log (tests' bare brokers) UNKNOWN_SERVER_ERROR.
//
// Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 fetch and caught-up timestamps (-1: not known); v2 replica directory
// ids (zero: none), error messages and the voters' endpoints (none: the
// metadata log of a node alone has no listener).
func init() { regKey(55, 0, 2, (*Broker).handleDescribeQuorum) }

// metadataTopic and metadataPartition name the metadata log as Kafka does.
const (
	metadataTopic     = "__cluster_metadata"
	metadataPartition = 0
)

func (b *Broker) handleDescribeQuorum(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if az := b.authz(r); !az.cluster(aclOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if b.cfg.MetadataQuorum == nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		msg := "this node runs no metadata log"
		resp.ErrorMessage = &msg
		return resp, nil
	}
	if b.cfg.ControllerChannel != nil && !b.isController() {
		return b.describeQuorumOnController(req, resp), nil
	}
	q := b.cfg.MetadataQuorum.Quorum()
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeQuorumResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDescribeQuorumResponseTopicPartition()
			sp.Partition = rp.Partition
			if rt.Topic != metadataTopic || rp.Partition != metadataPartition {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = q.LeaderID, q.LeaderEpoch, q.HighWatermark
			sp.CurrentVoters, sp.Observers = replicaStates(q.Voters), replicaStates(q.Observers)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// replicaStates is DescribeQuorum's view of voters or observers.
func replicaStates(rs []meta.QuorumReplica) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	var out []kmsg.DescribeQuorumResponseTopicPartitionReplicaState
	for _, r := range rs {
		s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		s.ReplicaID, s.LogEndOffset = r.ID, r.LogEndOffset
		s.LastFetchTimestamp, s.LastCaughtUpTimestamp = unixMillisOrUnknown(r.LastFetch), unixMillisOrUnknown(r.LastCaughtUp)
		out = append(out, s)
	}
	return out
}

// QuorumDescriber is the node's metadata log (*meta.MetadataLog) as the
// broker reads it: DescribeQuorum's state, whether this node is the
// controller (the admin requests are forwarded when it is not,
// forward.go), and the entries it has applied (read-your-writes after a
// forward, 58_envelope.go).
type QuorumDescriber interface {
	Quorum() meta.QuorumState
	// IsController reports whether this node is the controller (the Raft
	// leader), the only node that appends to the log.
	IsController() bool
	// Controller is the controller's node id, ok false while none is
	// known (the metadata image names it; cheaper than Quorum).
	Controller() (id int32, ok bool)
	// Applied is the index of the last entry this node has applied.
	Applied() uint64
	// WaitApplied waits until this node has applied entry index, or ctx
	// ends.
	WaitApplied(ctx context.Context, index uint64) error
}

// unixMillisOrUnknown is t in Unix milliseconds, -1 for the zero time
// (Kafka's unknown).
func unixMillisOrUnknown(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

// describeQuorumOnController asks the controller, which alone knows every
// voter's position, as Kafka's brokers forward DescribeQuorum; resp is
// answered with a retriable error when it cannot be reached.
func (b *Broker) describeQuorumOnController(req *kmsg.DescribeQuorumRequest, resp *kmsg.DescribeQuorumResponse) kmsg.Response {
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	got, err := b.cfg.ControllerChannel.Request(ctx, req)
	if err != nil {
		resp.ErrorCode = kerr.RequestTimedOut.Code
		msg := "asking the controller: " + err.Error()
		resp.ErrorMessage = &msg
		return resp
	}
	return got
}
