package control

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// alignTopic is LOG_ALIGNMENT for a topic that already has local data and
// is handed to a mirror (a failback, or a restart after a failover). The
// source is asked, with DescribeClusterMirrors, for the last epoch it
// mirrored from this cluster (SPEC.md section 4): the local log is cut at
// the end of that epoch here. Without one (the source never mirrored from
// us, or cannot say) the local data is not a prefix of the source's and
// the partition is mirrored from scratch. The fetcher's
// OffsetForLeaderEpoch at start then cuts whatever still diverges.
// REQUIRES: m's lock held; the topic is owned by m.
func (c *Plane) alignTopic(m state.Mirror, info partition.TopicInfo, partitions int32) error {
	lme := c.sourceLastMirrorEpochs(m, info.ID, partitions)
	for p := int32(0); p < partitions; p++ {
		local, err := c.parts.MirrorPartition(info.Name, p)
		if err != nil {
			return err
		}
		l := local
		if l.LogEndOffset() == l.LogStartOffset() {
			continue
		}
		epoch, ok := lme[p]
		to, scratch := lastMirrorEpochCut(l, epoch, ok)
		switch {
		case scratch:
			c.log.Info("no last mirror epoch from the source; mirroring from scratch",
				"mirror", m.Name, "topic", info.Name, "partition", p)
			if err := l.RestartAt(0); err != nil {
				return err
			}
		case to < l.LogEndOffset():
			c.log.Info("aligning to the last mirror epoch", "mirror", m.Name, "topic", info.Name,
				"partition", p, "epoch", epoch, "to", to)
			if err := l.TruncateTo(to); err != nil {
				return err
			}
		}
	}
	return nil
}

// lastMirrorEpochCut is where alignTopic cuts a log that holds records,
// given the source's last mirror epoch for it (known: the source gave
// one): at the end of that epoch here, to (the log end when that is
// nothing), or, without an epoch, everything (scratch: the log restarts
// empty at 0). The start dry run (align_preview.go) plans the same cut.
func lastMirrorEpochCut(l partition.View, epoch int32, known bool) (to int64, scratch bool) {
	if !known || epoch < 0 {
		return 0, true
	}
	if _, end := l.EndOffsetForEpoch(epoch); end >= 0 && end < l.LogEndOffset() {
		return end, false
	}
	return l.LogEndOffset(), false
}

// sourceLastMirrorEpochs asks the source which epoch of each partition it last
// mirrored from this cluster; partitions it does not know are absent.
func (c *Plane) sourceLastMirrorEpochs(m state.Mirror, id [16]byte, partitions int32) map[int32]int32 {
	out := map[int32]int32{}
	cl, err := c.sourceClient(m)
	if err != nil {
		return out
	}
	req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	clusterID := c.b.ClusterID()
	req.ClusterID = &clusterID
	lk := mirrorapi.DescribeClusterMirrorsLookup{TopicID: id}
	for p := int32(0); p < partitions; p++ {
		lk.Partitions = append(lk.Partitions, p)
	}
	req.LastMirrorEpochLookups = []mirrorapi.DescribeClusterMirrorsLookup{lk}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		c.log.Info("the source answers no last-mirror-epoch lookups", "mirror", m.Name, "err", fmt.Sprint(err))
		return out
	}
	d, ok := resp.(*mirrorapi.DescribeClusterMirrorsResponse)
	if !ok {
		return out
	}
	for _, r := range d.LookupResults {
		if r.TopicID != id {
			continue
		}
		for _, p := range r.Partitions {
			if prev, seen := out[p.PartitionIndex]; !seen || p.LastMirrorEpoch > prev {
				out[p.PartitionIndex] = p.LastMirrorEpoch
			}
		}
	}
	return out
}
