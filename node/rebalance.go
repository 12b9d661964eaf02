package node

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/meta"
)

// leaderRebalancer is the controller's preferred-leader balancing
// (auto.leader.rebalance.enable, Kafka's): every
// leader.imbalance.check.interval.seconds, while this node is the
// controller, the partitions of a broker that leads fewer of those it is
// preferred for than leader.imbalance.per.broker.percentage allows go
// back to it (meta.Controller.BalanceLeaders): after a node's restart,
// its leaderships come home without an operator.
type leaderRebalancer struct {
	stop chan struct{}
	done chan struct{}
}

// startLeaderRebalancer starts the balancing of c when cfg enables it;
// nil otherwise.
func startLeaderRebalancer(cfg broker.LeaderRebalanceConfig, c *meta.Controller, isController func() bool, log *slog.Logger) *leaderRebalancer {
	if !cfg.Enable || c == nil {
		return nil
	}
	r := &leaderRebalancer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(cfg.CheckInterval)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
			if !isController() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), min(cfg.CheckInterval, 30*time.Second))
			moved, err := c.BalanceLeaders(ctx, cfg.Percent)
			cancel()
			switch {
			case err != nil && !errors.Is(err, meta.ErrNotController):
				log.Warn("moving leaderships back to their preferred replicas", "err", err)
			case moved > 0:
				log.Info("moved leaderships back to their preferred replicas", "partitions", moved)
			}
		}
	}()
	return r
}

// close stops the balancing and waits for it; nil does nothing.
func (r *leaderRebalancer) close() {
	if r == nil {
		return
	}
	close(r.stop)
	<-r.done
}
