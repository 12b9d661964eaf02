package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/meta"
)

// The controller RPCs (BrokerRegistration, BrokerHeartbeat,
// AllocateProducerIds, AlterPartition) are how a broker takes part in the
// cluster (DESIGN.md "The cluster"): each calls cfg.Controller, the
// controller role of this node's metadata log, and answers NOT_CONTROLLER
// on a node that is not the controller, as Kafka's ControllerApis do. Their sender
// is a broker of the cluster: they need CLUSTER_ACTION on the cluster.

// controllerRPCTimeout bounds a controller call: one or two metadata log
// entries, or the barrier of a controller that has just been elected.
const controllerRPCTimeout = 10 * time.Second

// controllerCall runs fn against the controller, or answers NOT_CONTROLLER
// when this node runs none. It returns the Kafka error code of fn's error
// (controllerErrorCode).
func (b *Broker) controllerCall(what string, fn func(ctx context.Context, c *meta.Controller) error) int16 {
	c := b.cfg.Controller
	if c == nil {
		return kerr.NotController.Code
	}
	ctx, cancel := context.WithTimeout(context.Background(), controllerRPCTimeout)
	defer cancel()
	err := fn(ctx, c)
	code := controllerErrorCode(err)
	if code == kerr.UnknownServerError.Code {
		b.log.Error("controller call failed", "call", what, "err", err)
	}
	return code
}

// metadataWriteError is the Kafka error of a failed metadata change made
// for an admin request (a topic created, deleted or grown): NOT_CONTROLLER
// while the quorum has no leader or leadership moved (clients retry it
// after a metadata refresh, as they retry Kafka's), REQUEST_TIMED_OUT when
// the entry was not committed in time, KAFKA_STORAGE_ERROR otherwise.
// WHY: every failure used to answer KAFKA_STORAGE_ERROR ("Disk error when
// trying to access log file on the disk"), which clients do not retry and
// which sent an operator to the disks during a controller election.
func metadataWriteError(err error) *kerr.Error {
	return meta.WriteError(err, kerr.KafkaStorageError)
}

// controllerErrorCode is the Kafka error code of a controller call's
// error, as Kafka's QuorumController answers: NOT_CONTROLLER where
// leadership moved (or this node never had it), STALE_BROKER_EPOCH for an
// epoch that is not the registration's and for a broker not registered
// (Kafka's checkBrokerEpoch answers both so; the broker registers again),
// REQUEST_TIMED_OUT when the entry was not committed in time.
func controllerErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, meta.ErrNotController):
		return kerr.NotController.Code
	case errors.Is(err, meta.ErrStaleBrokerEpoch), errors.Is(err, meta.ErrUnknownBroker):
		return kerr.StaleBrokerEpoch.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}
