package broker

import (
	"slices"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/partition"
)

// The metadata image (meta.Image) is what handlers answer "who leads this
// partition, which brokers are there, who coordinates this key" from. The
// broker rebuilds it whenever a topic, a partition or a leader epoch
// changes and publishes it with one pointer swap; a handler loads it once
// per request, so it never sees half of a change. On one node the image
// holds one broker, this node, leading every partition with itself as the
// only replica and ISR, at the partition's leader epoch.
//
// The leader epoch of one node is its log's (partition.Partition.LeaderEpoch:
// the persisted floor or the newest epoch appended), so an append or a
// raised floor that moves it publishes a patched image (epochMoved). A
// truncation that lowers it (only a log whose batches carry epochs above
// its floor) shows at the next append. Appends are still stamped with
// Partition.LeaderEpoch, the image's epoch on one node.

// image returns the current metadata image.
func (b *Broker) image() *meta.Image { return b.img.Load() }

// publishImage publishes an image of the node's topics now.
func (b *Broker) publishImage() { b.partitions.Republish() }

// epochMoved publishes an image with p's leader epoch when it is no longer
// the one last published for it (a raised epoch floor, an append in a
// newer epoch): the partition registry's EpochMoved hook, which the
// registry calls only then, so an append whose epoch holds never gets
// here. The new image is the current one with p's entry patched, so it
// takes imgMu only, never the registry's lock (its callers may hold it).
func (b *Broker) epochMoved(p *partition.Partition) {
	epoch := p.LeaderEpoch()
	if epoch == p.PublishedEpoch() {
		return
	}
	b.imgMu.Lock()
	defer b.imgMu.Unlock()
	im := b.img.Load()
	if im == nil || imageTopic(im, p.Topic()) == nil {
		return // not published yet, or deleted: the next full build has it
	}
	if im.Partition(p.Topic().Name(), p.Index()) == nil {
		return
	}
	p.SetPublishedEpoch(epoch)
	b.img.Store(im.WithLeaderEpoch(p.Topic().Name(), p.Index(), epoch))
}

// imageTopic returns t's entry in im, nil when im does not hold this
// incarnation of t: a topic opened after im was loaded (its creation
// publishes a newer image). A node alone leads it; in a cluster its
// leader is unknown to this request (otherLeader, imagePartition).
func imageTopic(im *meta.Image, t *partition.Topic) *meta.Topic {
	if t == nil || im == nil {
		return nil
	}
	if it := im.Topic(t.Name()); it != nil && it.ID == t.ID() {
		return it
	}
	return nil
}

// otherLeader returns partition p of it when the image gives it to a node
// other than this one (no leader counts as another node), else nil: such
// a partition is answered NOT_LEADER_OR_FOLLOWER.
func otherLeader(im *meta.Image, it *meta.Topic, p int32) *meta.Partition {
	if ip := imagePartitionOf(im, it, p); ip != nil && ip.Leader != im.Self() {
		return ip
	}
	return nil
}

// unknownLeader is the image's answer for a partition of a topic opened
// since the image was loaded, in a cluster: another node may lead it
// (NOT_LEADER_OR_FOLLOWER, and the client asks again).
var unknownLeader = meta.Partition{Leader: -1}

// imagePartitionOf is partition p of it (im's entry of a topic, or nil
// when im does not hold it): nil for a partition im does not hold on a
// node alone (it leads every partition), unknownLeader in a cluster.
func imagePartitionOf(im *meta.Image, it *meta.Topic, p int32) *meta.Partition {
	if it == nil && im != nil && len(im.Brokers()) > 1 {
		return &unknownLeader
	}
	return it.Partition(p)
}

// partitionEpoch is p's leader epoch in the image (it is p's topic in
// it, or nil), p's own for a partition the image does not hold yet.
func partitionEpoch(it *meta.Topic, p *partition.Partition) int32 {
	if ip := it.Partition(p.Index()); ip != nil {
		return ip.LeaderEpoch
	}
	return p.LeaderEpoch()
}

// notLeaderMsg is the message of a NOT_LEADER_OR_FOLLOWER answer, Kafka's.
var notLeaderMsg = "This server is not the leader for that topic-partition."

// leaderEndpoints appends, once each, the brokers named by leaders that
// the image holds, on their listener named like listener: the
// NodeEndpoints (Brokers in kmsg) of Produce and Fetch answers with a
// CurrentLeader (KIP-951).
func leaderEndpoints[B any](im *meta.Image, leaders []int32, listener string, mk func(id int32, l meta.Listener, rack *string) B) []B {
	var out []B
	for i, id := range leaders {
		if id < 0 || slices.Contains(leaders[:i], id) {
			continue
		}
		br := im.Broker(id)
		if br == nil {
			continue
		}
		if l, ok := br.Listener(listener); ok {
			out = append(out, mk(id, l, br.Rack))
		}
	}
	return out
}
