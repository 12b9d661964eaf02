package broker

import (
	"crypto/tls"
	"net"
	"slices"
	"strconv"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/replicate"
	"github.com/kmirror/kmirror/state"
)

// Replication (DESIGN.md "The cluster", "Data"): each partition takes its
// assignment from the metadata log at every reconcile (partition's
// replica set: the leader moves its high watermark as its followers
// fetch), and the partitions this node follows are fetched from their
// leaders (replicate/). A leader serves its followers' fetches up to its
// log end and records their progress (01_fetch.go); acks=all waits for
// the ISR (00_produce.go).

// newReplicas is the node's replica fetchers; none for a bare broker,
// which has no metadata log and leads all it hosts.
func newReplicas(b *Broker) *replicate.Manager {
	if b.cfg.MetadataQuorum == nil {
		return nil
	}
	rc := b.cfg.Replication
	var epoch func() int64 // the fetches' ReplicaState.Epoch: KIP-903's check of ISR joins
	if b.cfg.ISR != nil {
		epoch = b.cfg.ISR.Epoch
	}
	return replicate.NewManager(replicate.Config{NodeID: b.cfg.NodeID, BrokerEpoch: epoch, LeaderAddr: b.leaderAddr, Logger: b.log,
		Fetchers: rc.NumFetchers, MaxWait: rc.FetchWaitMax, MinBytes: rc.FetchMinBytes,
		MaxBytes: rc.FetchResponseMaxBytes, PartitionMaxBytes: rc.FetchMaxBytes,
		Conn: fetch.ConnConfig{TLS: interBrokerTLS(b.cfg)}})
}

// interBrokerTLS is the TLS a follower connects to an SSL inter-broker
// listener with, as Kafka's inter-broker client: the listener's
// truststore to check the leader's certificate (and its host name), and
// this node's certificate for a listener that asks for one. Nil for a
// PLAINTEXT listener.
func interBrokerTLS(cfg Config) *tls.Config {
	if cfg.InterBrokerListener().Protocol != "SSL" || cfg.Security.TLS == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.Security.TLS.ClientCAs,
		Certificates: cfg.Security.TLS.Certificates}
}

// leaderAddr is the address followers reach node id at: its listener of
// the inter-broker listener's name (every node of a cluster has the same
// listener names).
func (b *Broker) leaderAddr(id int32) (string, bool) {
	im := b.image()
	if im == nil {
		return "", false
	}
	br := im.Broker(id)
	if br == nil {
		return "", false
	}
	name := b.cfg.InterBrokerListener().Name
	for _, l := range br.Listeners {
		if l.Name == name {
			return net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))), true
		}
	}
	return "", false
}

// applyAssignments gives every hosted partition its assignment from the
// store, empties the logs of those no longer replicated here, and has
// the replica fetchers follow the partitions this node is a follower of,
// whose leader is live in the image. A partition without an
// assignment (a bare broker, a topic older than the metadata log) stays
// committed at every append.
func (b *Broker) applyAssignments(parts []state.PartitionAssignment) {
	if b.replicas == nil {
		return
	}
	self := b.cfg.NodeID
	im := b.image()
	var follow []replicate.Target
	for _, a := range parts {
		t := b.partitions.TopicByID(a.TopicID)
		if t == nil {
			continue
		}
		p := t.Partition(a.Partition)
		if p == nil {
			continue
		}
		p.SetAssignment(self, assignmentOf(a))
		if dropped, err := p.DropIfNotReplica(); err != nil {
			b.log.Error("emptying the log of a partition no longer replicated here", "topic", t.Name(), "partition", a.Partition, "err", err)
		} else if dropped {
			b.log.Info("partition moved off this node: its log is emptied", "topic", t.Name(), "partition", a.Partition, "replicas", a.Replicas)
		}
		if a.Leader == self || a.Leader < 0 || !slices.Contains(a.Replicas, self) || !leaderLive(im, t.Name(), a.Partition) {
			continue
		}
		follow = append(follow, replicate.Target{Topic: t.Name(), TopicID: a.TopicID, Partition: a.Partition,
			Replica: p, Leader: a.Leader, LeaderEpoch: a.LeaderEpoch})
	}
	b.replicas.Follow(follow)
	b.groupLog.nudge() // the assignments name the leaders the loader follows
	b.txnLog.nudge()
}

// leaderLive reports whether the image names a leader for the partition
// (a fenced leader is none).
func leaderLive(im *meta.Image, topic string, p int32) bool {
	if im == nil || im.Topic(topic) == nil {
		return false
	}
	ip := im.Partition(topic, p)
	return ip != nil && ip.Leader >= 0
}

// ReplicationStat is what the node's partitions' replication looks like
// now, for the metrics: the partitions it leads, those of them whose ISR
// is smaller than their replicas (Kafka's UnderReplicatedPartitions) or
// than their min.insync.replicas (UnderMinIsrPartitionCount), and the
// partitions it follows.
type ReplicationStat struct {
	Leading, UnderReplicated, UnderMinISR, Following int
}

// ReplicationStat counts the node's partitions by replication state.
func (b *Broker) ReplicationStat() ReplicationStat {
	var st ReplicationStat
	for _, t := range b.partitions.Topics() {
		minISR := -1
		for _, p := range t.Partitions() {
			a, ok := p.Assignment()
			switch {
			case !ok:
			case a.Leader == b.cfg.NodeID:
				st.Leading++
				if len(a.ISR) < len(a.Replicas) {
					st.UnderReplicated++
				}
				if minISR < 0 {
					minISR = b.MinInsyncReplicas(t.Name())
				}
				if len(a.ISR) < minISR {
					st.UnderMinISR++
				}
			case slices.Contains(a.Replicas, b.cfg.NodeID):
				st.Following++
			}
		}
	}
	return st
}
