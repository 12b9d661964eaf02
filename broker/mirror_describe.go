package broker

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/kmirror/kmirror/mirrorapi"
)

// DescribeClusterMirrors in a cluster (issue 22). A mirror partition's
// fetcher runs on the partition's leader, so only the leader knows its
// live source offset, its lag in time and whether it is stalled; every
// other node holds what the metadata log does (the source offset of the
// last checkpoint, up to mirror.checkpoint's interval old). A node that
// answers Describe therefore asks the leaders of the partitions it does
// not lead, with LedPartitionsOnly, over the inter-broker listener, and
// puts their rows in its answer, as the prototype's admin client merges
// the answers of every broker. It asks the controller too, whose plane
// runs the metadata sync, for each mirror's LastGroupSyncMillis.
//
// A leader that cannot be asked (down, partitioned away, slower than
// describeFanOutTimeout) leaves this node's row in place, whose ReportedBy
// is -1: the operator sees which rows are not live. The leaders authorize
// the request as the inter-broker connection's principal, as a
// coordinator does the mirror's group sync (group_sync.go).

// describeFanOutTimeout bounds the wait for the leaders' rows: a Describe
// is what an operator watches during a failover, and one node down must
// not hold it for a request timeout.
const describeFanOutTimeout = 3 * time.Second

// describeClusterWide replaces, in resp (this node's answer to req), the
// rows of the partitions other nodes lead with those leaders' rows.
func (b *Broker) describeClusterWide(req *mirrorapi.DescribeClusterMirrorsRequest, resp *mirrorapi.DescribeClusterMirrorsResponse) {
	im := b.image()
	if req.LedPartitionsOnly || im == nil || !b.cfg.Cluster.Several() {
		return
	}
	// The nodes to ask, and the mirrors to ask each about.
	ask := map[int32]map[string]bool{}
	want := func(id int32, mirror string) {
		if id < 0 || id == b.cfg.NodeID {
			return
		}
		if ask[id] == nil {
			ask[id] = map[string]bool{}
		}
		ask[id][mirror] = true
	}
	for _, m := range resp.Mirrors {
		if m.ErrorCode != 0 {
			continue
		}
		want(im.Controller(), m.MirrorName)
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				if ip := im.Partition(t.TopicName, p.PartitionIndex); ip != nil {
					want(ip.Leader, m.MirrorName)
				}
			}
		}
	}
	if len(ask) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), describeFanOutTimeout)
	defer cancel()
	answers := make(map[int32]*mirrorapi.DescribeClusterMirrorsResponse, len(ask))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, mirrors := range ask {
		wg.Go(func() {
			r, err := b.describeAt(ctx, id, mirrors)
			if err != nil {
				if ok, held := b.warnings.allow("describe-fan-out/"+strconv.Itoa(int(id)), time.Now()); ok {
					b.log.Warn("DescribeClusterMirrors: a leader's rows could not be read; its partitions are described from the metadata log",
						"node", id, "err", err, "held_back", held)
				}
				return
			}
			mu.Lock()
			answers[id] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	mergeLeaderRows(resp, answers, func(topic string, p int32) int32 {
		if ip := im.Partition(topic, p); ip != nil {
			return ip.Leader
		}
		return -1
	}, im.Controller())
}

// mergeLeaderRows puts into resp the rows answers (by node id) hold for
// the partitions those nodes lead in leaderOf's view; each mirror's
// LastGroupSyncMillis is the controller's when it answered. A leader's
// answer without a partition (leadership moved meanwhile) leaves resp's
// row.
func mergeLeaderRows(resp *mirrorapi.DescribeClusterMirrorsResponse, answers map[int32]*mirrorapi.DescribeClusterMirrorsResponse,
	leaderOf func(topic string, p int32) int32, controller int32) {
	type key struct {
		mirror, topic string
		p             int32
	}
	rows := map[key]mirrorapi.DescribeClusterMirrorsResponsePartition{}
	noTopicIDs := map[[2]string]bool{}
	for id, a := range answers {
		for _, m := range a.Mirrors {
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					if p.ReportedBy == id {
						rows[key{m.MirrorName, t.TopicName, p.PartitionIndex}] = p
						noTopicIDs[[2]string{m.MirrorName, t.TopicName}] = noTopicIDs[[2]string{m.MirrorName, t.TopicName}] || t.NoSourceTopicIDs
					}
				}
			}
		}
	}
	var ctl map[string]int64
	if a := answers[controller]; a != nil {
		ctl = map[string]int64{}
		for _, m := range a.Mirrors {
			ctl[m.MirrorName] = m.LastGroupSyncMillis
		}
	}
	for mi := range resp.Mirrors {
		m := &resp.Mirrors[mi]
		if at, ok := ctl[m.MirrorName]; ok {
			m.LastGroupSyncMillis = at
		}
		for ti := range m.Topics {
			t := &m.Topics[ti]
			t.NoSourceTopicIDs = t.NoSourceTopicIDs || noTopicIDs[[2]string{m.MirrorName, t.TopicName}]
			for pi := range t.Partitions {
				p := &t.Partitions[pi]
				if r, ok := rows[key{m.MirrorName, t.TopicName, p.PartitionIndex}]; ok && leaderOf(t.TopicName, p.PartitionIndex) == r.ReportedBy {
					*p = r
				}
			}
		}
	}
}

// describeAt asks node id's DescribeClusterMirrors for the partitions of
// mirrors that it leads.
func (b *Broker) describeAt(ctx context.Context, id int32, mirrors map[string]bool) (*mirrorapi.DescribeClusterMirrorsResponse, error) {
	req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	req.LedPartitionsOnly = true
	for name := range mirrors {
		req.MirrorNames = append(req.MirrorNames, name)
	}
	req.SetVersion(mirrorapi.MaxVersion)
	resp, err := b.askNode(ctx, id, "kmirror-describe-fan-out", describeFanOutTimeout, req)
	if err != nil {
		return nil, err
	}
	return resp.(*mirrorapi.DescribeClusterMirrorsResponse), nil
}
