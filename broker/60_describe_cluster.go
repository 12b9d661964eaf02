package broker

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's endpoint types (KIP-919): who a DescribeCluster asks about.
const (
	endpointTypeBroker     int8 = 1
	endpointTypeController int8 = 2
)

// clusterOperations is the authorized-operations bitfield Kafka answers
// for the cluster resource without an authorizer: one bit per AclOperation
// code that applies to the cluster (AclEntry.supportedOperations).
const clusterOperations = 1<<5 | // CREATE
	1<<7 | // ALTER
	1<<8 | // DESCRIBE
	1<<9 | // CLUSTER_ACTION
	1<<10 | // DESCRIBE_CONFIGS
	1<<11 | // ALTER_CONFIGS
	1<<12 // IDEMPOTENT_WRITE

// DescribeCluster: v0-2
//
// Behavior:
// ClusterID, the unfenced brokers (each with its listener named like the
// one the request came in on, and its rack) and ControllerID (the
// metadata log's leader) come from the metadata image; a node alone is
// its only broker and its controller. A
// request for controllers (EndpointType 2) answers
// MISMATCHED_ENDPOINT_TYPE, as a Kafka broker does, and an unknown type
// UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST in v0, which cannot ask).
// ClusterAuthorizedOperations is Kafka's "not requested" value unless
// asked for; then, as Kafka without an authorizer, every operation that
// applies to a cluster.
//
// Authorization: as in Kafka, the request itself needs nothing (clients
// use it to find the brokers, as they use Metadata). With an authorizer,
// ClusterAuthorizedOperations, when asked for, holds the operations the
// sender may perform on the cluster if it may DESCRIBE it, else 0.
//
// kmirror differs from Kafka: every node is both broker and controller,
// so ControllerID is the controller's id where a Kafka broker names a
// random live broker.
//
// Version notes:
// v0 is flexible from the start; v1 endpoint type; v2 fenced brokers
// (IncludeFencedBrokers adds none: the image holds the unfenced brokers
// only).
func init() { regKey(60, 0, 2, (*Broker).handleDescribeCluster) }

func (b *Broker) handleDescribeCluster(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = endpointTypeBroker
	resp.ClusterAuthorizedOperations = math.MinInt32

	mismatch := kerr.MismatchedEndpointType.Code
	unsupported := kerr.UnsupportedEndpointType.Code
	if req.Version == 0 {
		mismatch, unsupported = kerr.InvalidRequest.Code, kerr.InvalidRequest.Code
	}
	switch req.EndpointType {
	case endpointTypeBroker:
	case endpointTypeController:
		resp.ErrorCode = mismatch
		msg := "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
		resp.ErrorMessage = &msg
		return resp, nil
	default:
		resp.ErrorCode = unsupported
		msg := fmt.Sprintf("Unsupported endpoint type %d", req.EndpointType)
		resp.ErrorMessage = &msg
		return resp, nil
	}

	im := b.image()
	resp.ClusterID = im.ClusterID()
	resp.ControllerID = im.Controller()
	for _, ib := range im.Brokers() {
		l, ok := ib.Listener(r.conn.Listener())
		if !ok {
			continue
		}
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port, br.Rack = ib.ID, l.Host, l.Port, ib.Rack
		resp.Brokers = append(resp.Brokers, br)
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOperations
		if az := b.authz(r); az.on() {
			resp.ClusterAuthorizedOperations = az.clusterOperations()
		}
	}
	return resp, nil
}
