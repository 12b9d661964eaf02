package broker

import (
	"github.com/kmirror/kmirror/meta"
)

// The metadata image (meta.Image) is what handlers answer "who leads this
// partition, which brokers are there, who coordinates this key" from. The
// broker rebuilds it whenever a topic, a partition or a leader epoch
// changes and publishes it with one pointer swap; a handler loads it once
// per request, so it never sees half of a change. On one node the image
// holds one broker, this node, leading every partition with itself as the
// only replica and ISR, at the partition's leader epoch.

// image returns the current metadata image.
func (b *Broker) image() *meta.Image { return b.img.Load() }

// publishImageLocked builds the image from the node's topics and
// publishes it.
// REQUIRES: b.mu held for writing (publications never interleave).
func (b *Broker) publishImageLocked() {
	self := b.cfg.NodeID
	bd := meta.NewBuilder(b.store.ClusterID(), self, self)
	ls := make([]meta.Listener, len(b.advertised))
	for i, l := range b.advertised {
		ls[i] = meta.Listener{Name: l.Name, Host: l.Host, Port: int32(l.Port)}
	}
	bd.AddBroker(meta.Broker{ID: self, Listeners: ls})
	replicas := []int32{self}
	for _, t := range b.topics {
		parts := t.parts()
		mt := &meta.Topic{Name: t.name, ID: t.id, Partitions: make([]meta.Partition, len(parts))}
		for i, p := range parts {
			mt.Partitions[i] = meta.Partition{Leader: self, LeaderEpoch: p.leaderEpoch(), Replicas: replicas, ISR: replicas}
		}
		bd.AddTopic(mt)
	}
	b.img.Store(bd.Build())
}

// publishImage is publishImageLocked taking b.mu.
func (b *Broker) publishImage() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publishImageLocked()
}

// epochMoved republishes the image when p's leader epoch is no longer the
// one it holds (a raised epoch floor, a log whose newest epoch moved).
// The check is a lookup: nothing is allocated while the epoch holds.
func (b *Broker) epochMoved(p *partition) {
	if ip := b.image().Partition(p.topic.name, p.index); ip != nil && ip.LeaderEpoch == p.leaderEpoch() {
		return
	}
	b.publishImage()
}

// imagePartition returns p's entry in im, nil when im does not know it
// (a topic created or grown after im was loaded: this node leads it).
func imagePartition(im *meta.Image, p *partition) *meta.Partition {
	return im.Partition(p.topic.name, p.index)
}

// ledElsewhere reports whether im gives p to another node, whose entry it
// returns: such a partition is answered NOT_LEADER_OR_FOLLOWER.
func (b *Broker) ledElsewhere(im *meta.Image, p *partition) (*meta.Partition, bool) {
	ip := imagePartition(im, p)
	return ip, ip != nil && ip.Leader != b.cfg.NodeID
}
