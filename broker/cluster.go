package broker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// The broker in a cluster (DESIGN.md "The cluster"). The metadata log
// applies every node's changes to each node's store; Reconcile then
// brings the rest of the broker in line with it: the hosted topics
// (partition.Manager.Sync), leader epochs, ACLs, client quotas, dynamic
// broker configs and the published image, which is built from the
// store's broker registrations and partition assignments. A change made
// by this node's own handler (on the controller) is already in place when
// Reconcile runs, which then finds nothing to do for it.
//
// Until replication exists, every node hosts a log for every partition
// (the ones it does not lead stay empty, and requests for them are
// answered NOT_LEADER_OR_FOLLOWER from the image); placement gives each
// partition the topic's replication factor of replicas, leaders spread
// over the brokers, which replication will fill.

// Reconcile applies to the broker's own state what the metadata log
// wrote to the store since the last call, of the kinds changes names. It
// is safe to call at any time, from one goroutine at a time (node/ calls
// it after applied entries that changed something, and at every change of
// controller).
func (b *Broker) Reconcile(changes state.Changes) error {
	var errs []error
	if changes&state.ChangedTopics != 0 {
		if err := b.partitions.Sync(); err != nil {
			errs = append(errs, err)
		}
	}
	if changes&(state.ChangedTopics|state.ChangedCluster) != 0 {
		parts, err := b.store.PartitionAssignments()
		if err == nil {
			err = b.followAssignedEpochs(parts)
		}
		if err != nil {
			errs = append(errs, err)
		}
		b.publishImage()
		if parts != nil {
			b.applyAssignments(parts)
		}
	}
	if changes&state.ChangedACLs != 0 {
		b.aclsChanged()
	}
	if changes&state.ChangedQuotas != 0 {
		if err := b.reloadQuotas(); err != nil {
			errs = append(errs, err)
		}
	}
	if changes&state.ChangedBrokerConfigs != 0 {
		if err := b.reloadDynamicConfigs(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// placeReplicas is the partition registry's Place: the new partitions'
// replicas on the registered, unfenced brokers, pl.RF each with leaders
// spread (meta.PlaceNew), or as a manual assignment gives them (checked
// against the image by the handler), the first replica leading and all
// in the ISR. A node with no registered broker (a bare broker, or a node
// whose store predates the metadata log) places nothing: it is the only
// replica of what it creates, and refuses more.
func (b *Broker) placeReplicas(id [16]byte, from, to int32, pl partition.Placement) ([]state.PartitionAssignment, error) {
	brokers, err := b.store.Brokers()
	if err != nil {
		return nil, err
	}
	if len(brokers) == 0 {
		if pl.RF > 1 {
			return nil, fmt.Errorf("%w: %d replicas on a node alone", meta.ErrReplicationFactor, pl.RF)
		}
		return nil, nil
	}
	if pl.Replicas != nil {
		out := make([]state.PartitionAssignment, len(pl.Replicas))
		for i, replicas := range pl.Replicas {
			out[i] = meta.NewPartition(id, from+int32(i), slices.Clone(replicas))
		}
		return out, nil
	}
	parts, err := b.store.PartitionAssignments()
	if err != nil {
		return nil, err
	}
	return meta.PlaceNew(brokers, parts, id, from, to-from, pl.RF)
}

// usableBrokers is how many brokers may take new replicas, Kafka's
// usable brokers: the registered ones that are unfenced and not shutting
// down, or this node alone when none is registered (a bare broker).
func (b *Broker) usableBrokers() (int, error) {
	brokers, err := b.store.Brokers()
	if err != nil {
		return 0, err
	}
	if len(brokers) == 0 {
		return 1, nil
	}
	n := 0
	for _, r := range brokers {
		if !r.Fenced && !r.ShuttingDown {
			n++
		}
	}
	return n, nil
}

// replicationFactorMsg is Kafka's INVALID_REPLICATION_FACTOR message for
// rf replicas when only usable brokers may take them ("" when they can),
// or the error reading the registrations.
func (b *Broker) replicationFactorMsg(rf int) (string, error) {
	usable, err := b.usableBrokers()
	if err != nil || rf <= usable {
		return "", err
	}
	return fmt.Sprintf("Unable to replicate the partition %d time(s): The target replication factor of %d "+
		"cannot be reached because only %d broker(s) are registered.", rf, rf, usable), nil
}

// followAssignedEpochs raises the leader epoch of every partition this
// node leads to its assignment's (the controller bumps it at each
// election), so that its appends are stamped with the epoch clients and
// followers are told.
func (b *Broker) followAssignedEpochs(parts []state.PartitionAssignment) error {
	raise := map[[16]byte]map[int32]int32{}
	for _, a := range parts {
		if a.Leader != b.cfg.NodeID {
			continue
		}
		t := b.partitions.TopicByID(a.TopicID)
		if t == nil || t.Partition(a.Partition) == nil || t.Partition(a.Partition).LeaderEpoch() >= a.LeaderEpoch {
			continue
		}
		if raise[a.TopicID] == nil {
			raise[a.TopicID] = map[int32]int32{}
		}
		raise[a.TopicID][a.Partition] = a.LeaderEpoch
	}
	var errs []error
	for id, epochs := range raise {
		if t := b.partitions.TopicByID(id); t != nil {
			if err := b.partitions.AdoptLeaderEpochs(t.Name(), epochs); err != nil {
				errs = append(errs, fmt.Errorf("raising the leader epochs of %s: %w", t.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// reloadQuotas makes the enforced client quotas the store's.
func (b *Broker) reloadQuotas() error {
	stored, err := b.store.ClientQuotas()
	if err != nil {
		return fmt.Errorf("reloading client quotas: %w", err)
	}
	b.quotas.replaceAll(stored)
	return nil
}

// reloadDynamicConfigs makes the dynamic broker configs (the cluster
// default and this node's) the store's, and re-applies the topics' log
// configs when they changed. Keystores set through this node's own
// configs on another node are not reloaded (the controller validated
// them against its own files).
func (b *Broker) reloadDynamicConfigs() error {
	dyn, err := b.store.BrokerConfigs()
	if err != nil {
		return fmt.Errorf("reloading broker configs: %w", err)
	}
	node, err := b.store.NodeConfigs(b.cfg.NodeID)
	if err != nil {
		return fmt.Errorf("reloading broker configs of node %d: %w", b.cfg.NodeID, err)
	}
	b.dynMu.Lock()
	same := maps.Equal(dyn, b.dynamicConfigs) && maps.Equal(node, b.nodeConfigs)
	if !same {
		b.dynamicConfigs, b.nodeConfigs = dyn, node
	}
	b.dynMu.Unlock()
	if same {
		return nil
	}
	return b.reapplyTopicConfigs()
}

// publishImageLocked builds the image from the node's topics and the
// cluster's records and publishes it: the partition registry's
// TopicsChanged hook. Without broker registrations (a bare broker, a
// node before its first registration) the node is the only broker and
// leads every partition. REQUIRES: the registry's lock held for writing.
func (b *Broker) publishImageLocked(topics []*partition.Topic) {
	b.imgMu.Lock()
	defer b.imgMu.Unlock()
	self := b.cfg.NodeID
	brokers, err := b.store.Brokers()
	var parts []state.PartitionAssignment
	if err == nil {
		parts, err = b.store.PartitionAssignments()
	}
	if err != nil {
		// Keep the image published: one built without the records would
		// have this node lead every partition, other nodes' too.
		if ok, held := b.warnings.allow("image-records", time.Now()); ok {
			b.log.Warn("reading the cluster's records for the metadata image; keeping the last image", "held_back", held, "err", err)
		}
		if b.img.Load() != nil {
			return
		}
		brokers, parts = nil, nil
	}
	if len(brokers) == 0 {
		ls := make([]state.BrokerEndpoint, len(b.advertised))
		for i, l := range b.advertised {
			ls[i] = state.BrokerEndpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port)}
		}
		brokers = []state.BrokerRegistration{{ID: self, Listeners: ls}}
	}
	controller := self
	if q := b.cfg.MetadataQuorum; q != nil {
		if id, ok := q.Controller(); ok {
			controller = id
		} else {
			controller = -1
		}
	}
	sts := make([]state.Topic, len(topics))
	byName := make(map[string]*partition.Topic, len(topics))
	for i, t := range topics {
		sts[i] = state.Topic{Name: t.Name(), ID: t.ID(), Partitions: int32(len(t.Partitions()))}
		byName[t.Name()] = t
	}
	localEpoch := func(name string, p int32) int32 {
		pt := byName[name].Partition(p)
		epoch := pt.LeaderEpoch()
		pt.SetPublishedEpoch(epoch)
		return epoch
	}
	b.img.Store(meta.ImageFromRecords(b.store.ClusterID(), self, controller, brokers, sts, parts, localEpoch))
	if b.groupLog != nil {
		b.groupLog.nudge() // the coordinator partitions' leaders may have moved
		b.txnLog.nudge()
	}
}
