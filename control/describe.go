package control

import (
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// DescribeClusterMirrors reports, for every partition in every state, the
// last known offsets (issue 16 item 7) and how fresh they are (item 2):
//
//	SourceOffset       the fetcher's live source high watermark when it has
//	                   read one since it started, else the one persisted
//	                   (state.MirrorPartitionState.SourceOffset: written
//	                   when the fetcher is removed and by the checkpoint,
//	                   offsets_checkpoint.go), else -1
//	SourceOffsetAge    how long ago that value was read
//	DestinationOffset  the local high watermark; for STOPPING and STOPPED
//	                   the log end when mirroring stopped (LastMirrorOffset),
//	                   so a failover's final offsets stay readable after
//	                   the topic takes writes of its own
//	Lag                SourceOffset - DestinationOffset, at least 0
//	Stalled            the fetcher has had no good answer for longer than
//	                   request.timeout.ms (fetch.Status.Stalled)
//	LagMillis          the lag in time, the RPO: how long ago, at most, the
//	                   oldest source record the copy lacks reached the
//	                   source (fetch.Status.LagSince), -1 without a fetcher
//	                   or before its first answer (issue 18 item 2)
//	ReportedBy         this node, for the partitions it leads (a node
//	                   alone leads all), whose fetchers run here; -1 for
//	                   the others, whose rows hold what the metadata log
//	                   does. In a cluster the broker replaces those rows
//	                   with their leaders' (broker/mirror_describe.go);
//	                   a request with LedPartitionsOnly, which is how it
//	                   asks, gets the led rows alone.
//
// The prototype reported offsets for MIRRORING partitions only, -1
// otherwise: a "wait until lag is 0" runbook never ended on a paused or
// idle partition, and a failover left no record of where the copy was.

func (c *Plane) describe(r *mirrorapi.DescribeClusterMirrorsRequest) kmsg.Response {
	resp := r.ResponseKind().(*mirrorapi.DescribeClusterMirrorsResponse)
	mirrors, _ := c.store.Mirrors()
	now := time.Now()
	for _, m := range mirrors {
		if len(r.MirrorNames) > 0 && !slices.Contains(r.MirrorNames, m.Name) {
			continue
		}
		dm := mirrorapi.NewDescribeClusterMirrorsResponseMirror()
		dm.MirrorName = m.Name
		if at := c.LastGroupSync(m.Name); !at.IsZero() {
			dm.LastGroupSyncMillis = at.UnixMilli()
		}
		states, _ := c.store.MirrorPartitionStates(m.Name)
		byTopic := map[string][]state.MirrorPartitionState{}
		var names []string
		for _, ps := range states {
			if r.LedPartitionsOnly && !c.leads(ps.Topic, ps.Partition) {
				continue
			}
			if _, ok := byTopic[ps.Topic]; !ok {
				names = append(names, ps.Topic)
			}
			byTopic[ps.Topic] = append(byTopic[ps.Topic], ps)
		}
		sort.Strings(names)
		for _, t := range names {
			dt := mirrorapi.DescribeClusterMirrorsResponseTopic{TopicName: t}
			if info, ok := c.parts.Info(t); ok {
				dt.TopicID = info.ID
			}
			for _, ps := range byTopic[t] {
				dt.Partitions = append(dt.Partitions, c.describePartition(ps, now))
				if st, err := c.fm.Status(m.Name, t, ps.Partition); err == nil && st.NoSourceTopicIDs {
					dt.NoSourceTopicIDs = true
				}
			}
			dm.Topics = append(dm.Topics, dt)
		}
		resp.Mirrors = append(resp.Mirrors, dm)
	}
	for _, name := range r.MirrorNames {
		if !slices.ContainsFunc(resp.Mirrors, func(dm mirrorapi.DescribeClusterMirrorsResponseMirror) bool { return dm.MirrorName == name }) {
			resp.Mirrors = append(resp.Mirrors, mirrorapi.DescribeClusterMirrorsResponseMirror{MirrorName: name,
				ErrorCode: mirrorapi.ErrUnknownClusterMirror, ErrorMessage: strp("no cluster mirror " + name)})
		}
	}
	if r.ClusterID != nil {
		resp.LookupResults = c.lastMirrorEpochs(mirrors, *r.ClusterID, r.LastMirrorEpochLookups)
	}
	return resp
}

// describePartition is one partition's row (see the table above), as of
// now.
func (c *Plane) describePartition(ps state.MirrorPartitionState, now time.Time) mirrorapi.DescribeClusterMirrorsResponsePartition {
	dp := mirrorapi.NewDescribeClusterMirrorsResponsePartition()
	dp.PartitionIndex, dp.StateValue, dp.RetryAttempt = ps.Partition, ps.State.String(), ps.RetryAttempt
	if ps.ErrorMessage != "" {
		dp.ErrorMessage = strp(ps.ErrorMessage)
	}
	src, read := ps.SourceOffset, ps.SourceOffsetTime
	logEnd := int64(-1)
	if st, err := c.fm.Status(ps.Mirror, ps.Topic, ps.Partition); err == nil {
		// A fetcher that has not answered yet (SourceUpdated zero: after
		// a restart, or a source broker that died) knows less than the
		// store.
		if st.SourceHighWatermark >= 0 && st.SourceUpdated.After(read) {
			src, read = st.SourceHighWatermark, st.SourceUpdated
		}
		dp.Stalled = st.Stalled
		logEnd = st.LogEndOffset
		if !st.LagSince.IsZero() {
			dp.LagMillis = max(now.Sub(st.LagSince).Milliseconds(), 0)
		}
	}
	if c.leads(ps.Topic, ps.Partition) {
		dp.ReportedBy = c.b.NodeID()
	}
	dp.DestinationOffset = c.destinationOffset(ps, logEnd)
	if !read.IsZero() {
		dp.SourceOffset = src
		dp.SourceOffsetAgeMillis = max(now.Sub(read).Milliseconds(), 0)
	}
	if dp.SourceOffset >= 0 && dp.DestinationOffset >= 0 {
		dp.Lag = max(dp.SourceOffset-dp.DestinationOffset, 0)
	}
	return dp
}

// destinationOffset is a partition's destination offset as Describe
// reports it. Mirrored (every state before STOPPING): the local high
// watermark, what consumers can read, capped by the log end the fetcher
// saw (logEnd, -1 without a fetcher). WHY not the log end alone: storage
// publishes a new log end before it updates the epoch cache (a file write
// when the epoch is new) and then the high watermark, so for that window a
// "lag 0" taken from the log end promised records no consumer could read
// yet, and an operator failing over on it would act too early. STOPPING
// and STOPPED: the log end when mirroring stopped, -1 if unknown; the
// topic's own writes since are not the copy's.
func (c *Plane) destinationOffset(ps state.MirrorPartitionState, logEnd int64) int64 {
	if ps.State == state.StateStopping || ps.State == state.StateStopped {
		return ps.LastMirrorOffset
	}
	local, err := c.parts.MirrorPartition(ps.Topic, ps.Partition)
	if err != nil {
		return logEnd
	}
	hw := local.HighWatermark()
	if logEnd >= 0 {
		hw = min(hw, logEnd)
	}
	return hw
}
