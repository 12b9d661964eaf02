package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// The mirror's group offset sync (sync/groups) writes through these: it
// must not touch a group that has members, and commits as an admin tool
// does (generation -1, no member), which the coordinator refuses for an
// active group, so a group that becomes active meanwhile wins.
//
// A group's state lives on its coordinator (FindCoordinator's answer: the
// leader of its partition of __consumer_offsets), and the sync runs on
// the controller: a group another node coordinates is asked and committed
// there, over the inter-broker listener, as Kafka's destination admin
// client would. That node authorizes the requests as the inter-broker
// connection's principal.

// groupRPCTimeout bounds one request to another node's coordinator.
const groupRPCTimeout = 10 * time.Second

// maxGroupAsks bounds the sync's requests in flight to other nodes'
// coordinators. A group waiting for its coordinator to be created, loaded
// or moved holds no slot while it waits, so it cannot starve the groups of
// live coordinators; a request to a node that does not answer (a dial or
// a read that hangs) holds its slot until the sync's ctx ends.
const maxGroupAsks = 16

// GroupActive reports whether group has members (at its coordinator). A
// coordinator that cannot be asked within ctx is an error: the sync
// leaves the group alone rather than overwrite what its consumers commit,
// and reports it (a failover's final sync names it), where counting it as
// active would leave it out in silence.
func (b *Broker) GroupActive(ctx context.Context, group string) (bool, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	r, err := b.atGroupCoordinator(ctx, group, req, func() kmsg.Response { return b.groups.DescribeGroups(req) })
	if err != nil {
		b.log.Warn("mirror group sync: asking the group's coordinator whether it is active; skipped", "group", group, "err", err)
		return false, err
	}
	resp := r.(*kmsg.DescribeGroupsResponse)
	if len(resp.Groups) != 1 {
		return false, nil
	}
	switch resp.Groups[0].State {
	case "Stable", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling":
		return true, nil
	}
	return false, nil
}

// CommitGroupOffsets commits offsets for group as a simple (memberless)
// commit, at its coordinator.
func (b *Broker) CommitGroupOffsets(ctx context.Context, group string, offs []state.GroupOffset) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.Generation = group, -1
	byTopic := map[string]int{}
	for _, o := range offs {
		i, ok := byTopic[o.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[o.Topic] = i
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = o.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		meta := o.Metadata
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Partition, o.Offset, o.LeaderEpoch, &meta
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	r, err := b.atGroupCoordinator(ctx, group, req, func() kmsg.Response { return b.groups.OffsetCommit(req) })
	if err != nil {
		return err // the sync names the group
	}
	for _, t := range r.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// ShareGroups reports whether share groups are served ("share" in
// group.coordinator.rebalance.protocols): the mirror syncs their start
// offsets only then.
func (b *Broker) ShareGroups() bool { return b.cfg.ShareProtocol() }

// ErrShareGroupActive is AlterShareStartOffsets' error for a share group
// with members.
var ErrShareGroupActive = errors.New("the share group has members")

// AlterShareStartOffsets sets share group start offsets (the mirror's
// share group sync), as kafka-share-groups.sh --reset-offsets does: the
// coordinator creates the group if it does not exist and refuses a group
// with members (ErrShareGroupActive) or of another kind
// (GROUP_ID_NOT_FOUND).
func (b *Broker) AlterShareStartOffsets(ctx context.Context, group string, offs map[string]map[int32]int64) error {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	for _, topic := range slices.Sorted(maps.Keys(offs)) {
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = topic
		for _, p := range slices.Sorted(maps.Keys(offs[topic])) {
			rt.Partitions = append(rt.Partitions, kmsg.AlterShareGroupOffsetsRequestTopicPartition{Partition: p,
				StartOffset: offs[topic][p]})
		}
		req.Topics = append(req.Topics, rt)
	}
	r, err := b.atGroupCoordinator(ctx, group, req, func() kmsg.Response { return b.groups.AlterShareGroupOffsets(req) })
	if err != nil {
		return err
	}
	resp := r.(*kmsg.AlterShareGroupOffsetsResponse)
	switch code := resp.ErrorCode; {
	case code == kerr.NonEmptyGroup.Code:
		return ErrShareGroupActive
	case code != 0 && resp.ErrorMessage != nil:
		return fmt.Errorf("%w (%s)", kerr.ErrorForCode(code), *resp.ErrorMessage)
	case code != 0:
		return kerr.ErrorForCode(code)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// atGroupCoordinator answers req, a request of group: local() when this
// node coordinates the group (always, alone), else over a connection to
// the coordinator's inter-broker listener, at the highest version both
// support up to req's.
//
// The coordinator is the leader of the group's partition of
// __consumer_offsets, which is created first if it does not exist; while
// it is being created or loaded, or its leadership moves, the request is
// tried again for up to groupRPCTimeout (or until ctx ends, if sooner),
// so that one sync (a failover's final one above all) does not skip the
// group.
func (b *Broker) atGroupCoordinator(ctx context.Context, group string, req kmsg.Request, local func() kmsg.Response) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, groupRPCTimeout)
	defer cancel()
	for {
		var resp kmsg.Response
		var err error
		// coordinatorError has __consumer_offsets created if need be.
		switch b.coordinatorError(meta.CoordinatorGroup, group) {
		case kerr.CoordinatorNotAvailable.Code:
			err = errors.New("__consumer_offsets is being created, or the group's partition has no leader")
		case kerr.CoordinatorLoadInProgress.Code:
			err = errors.New("the group's partition of __consumer_offsets is loading")
		default:
			resp, err = b.atGroupCoordinatorOnce(ctx, group, req, local)
			if err == nil && coordinatorMoving(resp) {
				err = errors.New("the group's coordinator is moving")
			}
		}
		if err == nil {
			return resp, nil
		}
		select {
		case <-b.closing:
			return nil, err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// coordinatorMoving reports whether resp, a DescribeGroups or OffsetCommit
// answer, says the coordinator is not there yet.
func coordinatorMoving(resp kmsg.Response) bool {
	moving := func(code int16) bool {
		return code == kerr.CoordinatorLoadInProgress.Code || code == kerr.NotCoordinator.Code ||
			code == kerr.CoordinatorNotAvailable.Code
	}
	switch r := resp.(type) {
	case *kmsg.DescribeGroupsResponse:
		for _, g := range r.Groups {
			if moving(g.ErrorCode) {
				return true
			}
		}
	case *kmsg.AlterShareGroupOffsetsResponse:
		return moving(r.ErrorCode)
	case *kmsg.ReadShareGroupStateResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if moving(p.ErrorCode) {
					return true
				}
			}
		}
	case *kmsg.WriteShareGroupStateResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if moving(p.ErrorCode) {
					return true
				}
			}
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if moving(p.ErrorCode) {
					return true
				}
			}
		}
	}
	return false
}

// atGroupCoordinatorOnce is one try of atGroupCoordinator.
func (b *Broker) atGroupCoordinatorOnce(ctx context.Context, group string, req kmsg.Request, local func() kmsg.Response) (kmsg.Response, error) {
	im := b.image()
	if im == nil || !b.cfg.Cluster.Several() {
		return local(), nil
	}
	c, ok := im.Coordinator(meta.CoordinatorGroup, group)
	if !ok {
		return nil, fmt.Errorf("no coordinator for group %s", group)
	}
	if c.ID == b.cfg.NodeID {
		return local(), nil
	}
	select {
	case b.groupAsks <- struct{}{}:
		defer func() { <-b.groupAsks }()
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	return b.askNode(ctx, c.ID, "kmirror-mirror-group-sync", groupRPCTimeout, req)
}
