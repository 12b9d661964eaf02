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

// HeartbeatFence is a heartbeat that asks to be fenced, Kafka's
// BrokerHeartbeat with WantFence: it renews broker id's session and,
// when the broker is unfenced, fences it as an expired session would
// (its leaderships move, it leaves the ISRs); it stays fenced until a
// heartbeat without WantFence unfences it. A fenced broker leads nothing:
// the result is Fenced and ShutdownReady (Kafka answers a WantFence with
// WantShutDown by shutting the broker down at once).
func (c *Controller) HeartbeatFence(ctx context.Context, id int32, epoch int64) (HeartbeatResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return HeartbeatResult{}, err
	}
	b, err := c.heartbeatFrom(id, epoch)
	if err != nil {
		return HeartbeatResult{}, err
	}
	if !b.Fenced {
		b.Fenced, b.ShuttingDown = true, false
		ops, err := c.brokerChange(b, c.fenceOps)
		if err != nil {
			return HeartbeatResult{}, err
		}
		if _, err := c.apply(ctx, ops); err != nil {
			return HeartbeatResult{}, fmt.Errorf("fencing broker %d: %w", id, err)
		}
	}
	leads, err := c.leads(id)
	if err != nil {
		return HeartbeatResult{}, err
	}
	return HeartbeatResult{Fenced: true, ShutdownReady: !leads}, nil
}
