package partition

import (
	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/storage"
	"time"
)

// View is a partition as the mirror control plane reads it without writing:
// its bounds, its epochs and its batches. The dry run of a mirror start
// reads a topic that is still writable through one.
type View interface {
	LogStartOffset() int64
	LogEndOffset() int64
	HighWatermark() int64
	// Size is the bytes the log holds.
	Size() int64
	// Read reads whole batches from offset, as storage.Log.Read.
	Read(offset int64, maxBytes int, upTo int64, dst []byte) ([]byte, storage.ReadInfo, error)
	// LatestEpoch is the newest leader epoch of the log's records; false
	// when the log has none.
	LatestEpoch() (epoch int32, ok bool)
	// EpochForOffset is the leader epoch of the record at offset.
	EpochForOffset(offset int64) (epoch int32, ok bool)
	// EndOffsetForEpoch answers OffsetForLeaderEpoch for the log (storage.Log's).
	EndOffsetForEpoch(epoch int32) (int32, int64)
	// PreviewTruncateTo is what TruncateTo(offset) would cut.
	PreviewTruncateTo(offset int64) (storage.Truncation, bool, error)
}

// Follower is a partition as a fetcher that copies another log into it
// writes it: the mirror fetchers (fetch/) and the mirror control plane
// (control/) today, the replica fetchers of the cluster later (DESIGN.md
// "The cluster": followers append the leader's bytes at the leader's
// offsets through this same path). It appends verified batches at their
// own offsets, truncates, restarts and advances the log start; the node's
// high watermark and waiters follow each append.
type Follower interface {
	View
	// TopicID is the local topic's id: the source's, for sources with
	// topic ids (Kafka 2.8+), else one this node assigned.
	TopicID() [16]byte
	// LeaderEpoch is the node's leader epoch for the partition.
	LeaderEpoch() int32
	// RaiseLeaderEpoch persists a higher local leader epoch.
	RaiseLeaderEpoch(epoch int32) error
	// AppendMirror appends verified batches at their own offsets, then
	// commits them and wakes the partition's consumers.
	AppendMirror(batches []byte) (storage.AppendResult, error)
	// AppendChunk is AppendMirror for batches whose walk collected their
	// summary (batch.Iterator.Collect): no header is walked again.
	AppendChunk(c *batch.Chunk) (storage.AppendResult, error)
	// AppendControl appends a control batch built for the log end and
	// the leader epoch (failover's ABORT markers and MIRROR_PID_RESET)
	// and returns the log end after it and the leadership it was
	// appended in, for AwaitCommitted.
	AppendControl(build func(base int64, epoch int32) []byte) (end int64, lead Leadership, err error)
	// Leadership is the partition's current leadership, ok false when
	// another node leads it.
	Leadership() (lead Leadership, ok bool)
	// AwaitCommitted waits until the high watermark covers end, appended
	// in lead (Partition.AwaitCommitted).
	AwaitCommitted(end int64, lead Leadership, timeout time.Duration, stop <-chan struct{}) Commit
	// TruncateTo cuts the log back to offset (a divergence).
	TruncateTo(offset int64) error
	// RestartAt empties the log and restarts it at offset.
	RestartAt(offset int64) error
	// AdvanceLogStart moves the log start up to offset.
	AdvanceLogStart(offset int64) error
	// OngoingTxns are the transactions open in the log.
	OngoingTxns() []storage.OngoingTxn
}

// *Partition is what Manager hands to fetchers and the control plane.
var _ Follower = (*Partition)(nil)

// The methods of View and Follower, documented there: each is one call
// into the log, so a fetcher pays one interface call per use, per fetched
// partition, and nothing per batch.

func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }
func (p *Partition) LogEndOffset() int64   { return p.log.LogEndOffset() }
func (p *Partition) HighWatermark() int64  { return p.log.HighWatermark() }
func (p *Partition) Size() int64           { return p.log.Size() }
func (p *Partition) TopicID() [16]byte     { return p.topic.id }

func (p *Partition) LatestEpoch() (int32, bool) {
	e, ok := p.log.Epochs().Latest()
	return e.Epoch, ok
}

func (p *Partition) EpochForOffset(offset int64) (int32, bool) {
	return p.log.Epochs().EpochForOffset(offset)
}

func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return p.log.EndOffsetForEpoch(epoch)
}

func (p *Partition) PreviewTruncateTo(offset int64) (storage.Truncation, bool, error) {
	return p.log.PreviewTruncateTo(offset)
}

func (p *Partition) Read(offset int64, maxBytes int, upTo int64, dst []byte) ([]byte, storage.ReadInfo, error) {
	return p.log.Read(offset, maxBytes, upTo, dst)
}

func (p *Partition) AppendMirror(batches []byte) (res storage.AppendResult, err error) {
	_, err = p.asMirrorLeader(func() error {
		res, err = p.log.AppendMirror(batches)
		return err
	})
	if err != nil {
		return res, err
	}
	p.Appended()
	return res, nil
}

func (p *Partition) AppendChunk(c *batch.Chunk) (res storage.AppendResult, err error) {
	_, err = p.asMirrorLeader(func() error {
		res, err = p.log.AppendChunk(c)
		return err
	})
	if err != nil {
		return res, err
	}
	p.Appended()
	return res, nil
}

// AppendControl appends a control batch (a transaction marker, a
// MIRROR_PID_RESET) built by the caller to the partition, at its log end,
// with its leader epoch, and wakes its consumers and followers.
func (p *Partition) AppendControl(build func(base int64, epoch int32) []byte) (end int64, lead Leadership, err error) {
	lead, err = p.asMirrorLeader(func() error {
		raw := build(p.log.LogEndOffset(), p.LeaderEpoch())
		res, err := p.log.AppendControl(raw, p.LeaderEpoch())
		end = res.NextOffset
		return err
	})
	if err != nil {
		return 0, lead, err
	}
	p.Appended()
	return end, lead, nil
}

func (p *Partition) TruncateTo(offset int64) error {
	_, err := p.asMirrorLeader(func() error { return p.log.TruncateTo(offset) })
	return err
}

func (p *Partition) RestartAt(offset int64) error {
	_, err := p.asMirrorLeader(func() error { return p.log.TruncateFullyAndStartAt(offset) })
	return err
}

func (p *Partition) AdvanceLogStart(offset int64) error {
	_, err := p.asMirrorLeader(func() error { return p.log.SetLogStartOffset(offset) })
	return err
}

func (p *Partition) OngoingTxns() []storage.OngoingTxn { return p.log.Producers().OngoingTxns() }

// asMirrorLeader runs fn, a mirror fetcher's or failover's write, while
// this node leads p (always, on a node alone) and p cannot change its
// role, and returns the leadership it ran in; ErrNotLeader without
// running it otherwise. In a cluster a mirror
// partition is written by its leader only (DESIGN.md "Mirroring"): a
// fetcher whose node lost the leadership must not append after the new
// leader resumed from its own log end, or the two logs diverge at the
// same offsets. Unlike AppendAsLeader there is no epoch floor: mirrored
// batches carry the source's epochs, not this node's.
func (p *Partition) asMirrorLeader(fn func() error) (Leadership, error) {
	rs := &p.replicas
	rs.transition.RLock()
	defer rs.transition.RUnlock()
	lead, ok := p.Leadership()
	if !ok {
		return lead, ErrNotLeader
	}
	return lead, fn()
}

// RaiseLeaderEpoch persists a higher local leader epoch before the
// batches that need it are appended (DESIGN.md decision 3); in a cluster
// the controller raises the partition's first (Config.RaiseAssignedEpochs).
func (p *Partition) RaiseLeaderEpoch(epoch int32) error {
	if err := p.topic.m.raiseAssigned(map[string]*Topic{p.topic.name: p.topic},
		map[string]map[int32]int32{p.topic.name: {p.index: epoch}}); err != nil {
		return err
	}
	stored, err := p.topic.m.cfg.Store.PutLeaderEpoch(p.topic.id, p.index, epoch)
	if err != nil {
		return err
	}
	p.epochFloor.Store(stored)
	p.epochMaybeMoved()
	return nil
}
