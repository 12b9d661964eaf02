package meta

import (
	"context"
	"fmt"
)

// CheckBrokerEpoch fails with ErrStaleBrokerEpoch unless broker id is
// registered at epoch, Kafka's ClusterControlManager.checkBrokerEpoch
// (which answers STALE_BROKER_EPOCH for a broker not registered too; the
// error here wraps ErrUnknownBroker then, so callers can tell), and with
// ErrNotController elsewhere than on the controller. AllocateProducerIds
// checks its sender with it.
func (c *Controller) CheckBrokerEpoch(ctx context.Context, id int32, epoch int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return err
	}
	b, ok, err := c.broker(id)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: %w: broker %d", ErrStaleBrokerEpoch, ErrUnknownBroker, id)
	case b.Epoch != epoch:
		return fmt.Errorf("%w: broker %d at epoch %d, registered at %d", ErrStaleBrokerEpoch, id, epoch, b.Epoch)
	}
	return nil
}

// Applied is the index of the last metadata log entry the controller's
// store holds: a broker that has applied as far is caught up (Kafka's
// BrokerHeartbeat IsCaughtUp).
func (c *Controller) Applied() uint64 { return c.log.Applied() }
