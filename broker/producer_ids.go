package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// producerIDBlock is how many producer ids one block holds: Kafka's
// controller hands out blocks of 1000 (AllocateProducerIds), and so does
// ours.
const producerIDBlock = 1000

// ProducerIDBlocks hands out blocks of producer ids: the cluster's
// controller (meta.Controller's AllocateProducerIDs on the controller
// itself, AllocateProducerIds elsewhere), or a bare broker's state store.
type ProducerIDBlocks interface {
	// ProducerIDBlock reserves a block of ids no other block overlaps,
	// [first, first+n). after is the highest id the broker's logs know
	// (-1: none): a source that can reserve past it does; one that cannot
	// (AllocateProducerIds has no such field) may return a block below,
	// which the broker skips and asks again.
	ProducerIDBlock(ctx context.Context, after int64) (first, n int64, err error)
}

// storeProducerIDBlocks is a bare broker's source: its state store.
type storeProducerIDBlocks struct{ store *state.Store }

func (s storeProducerIDBlocks) ProducerIDBlock(_ context.Context, after int64) (int64, int64, error) {
	if after >= 0 {
		if err := s.store.SkipProducerIDsThrough(after); err != nil {
			return 0, 0, fmt.Errorf("keeping producer ids above the logs' %d: %w", after, err)
		}
	}
	first, err := s.store.AllocateProducerIDs(producerIDBlock)
	return first, producerIDBlock, err
}

// producerIDBlockTimeout bounds the wait for a block: a controller that
// has just been elected, or one a network away.
const producerIDBlockTimeout = 10 * time.Second

// producerIDs hands out producer ids from blocks its source reserves, so
// an id is never reissued after a restart, nor by another broker, and
// none reaches the range of rewritten mirror ids (DESIGN.md decision 2;
// state enforces the ceiling).
type producerIDs struct {
	src ProducerIDBlocks
	// after is the highest id the logs knew at the start
	// (skipKnownProducerIDs), -1 for none: no id at or below it is handed
	// out. Set before any request is served.
	after     int64
	mu        sync.Mutex
	next, end int64
}

func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		ctx, cancel := context.WithTimeout(context.Background(), producerIDBlockTimeout)
		defer cancel()
		// A source that cannot start past after (a remote controller)
		// answers blocks below it until its allocator gets there: each
		// is skipped. That happens only on a store lost and rebuilt
		// while the logs stayed, and the controller's allocator moves
		// 1000 ids per call, so the bound is the timeout.
		for {
			first, n, err := p.src.ProducerIDBlock(ctx, p.after)
			if err != nil {
				return -1, err
			}
			if start := max(first, p.after+1); start < first+n {
				p.next, p.end = start, first+n
				break
			}
		}
	}
	id := p.next
	p.next++
	return id, nil
}

// skipKnownProducerIDs keeps the allocator above every producer id the
// logs of writable topics know. Mirror topics are left out: their ids are
// the source's, never handed to local producers, and failover expires
// them (MIRROR_PID_RESET). WHY: the blocks handed out live in the
// state store; a store lost and rebuilt (kmirror storage rebuild) or made
// anew would hand out ids from 0 again, and a new idempotent producer
// given an id a log knows at a higher sequence is answered
// OUT_OF_ORDER_SEQUENCE. Producer state expires (producer.id.expiration.ms),
// so ids older than that may come back, as they may in Kafka.
//
// It writes nothing: the highest id is handed to the block source with
// every request for a block (ProducerIDBlocks), since on a node that is
// not the controller the allocator's record is the controller's to
// write, and this node may not be registered with it yet at the start.
// REQUIRES: the topics are loaded, no request is served yet.
func (b *Broker) skipKnownProducerIDs() {
	highest := int64(-1)
	for _, t := range b.partitions.Topics() {
		if t.ReadOnly() {
			continue
		}
		for _, p := range t.Partitions() {
			for _, e := range p.Log().Producers().Entries() {
				if e.ProducerID < batch.MirrorPIDOffset-1 { // a stray rewritten id must not stop the start
					highest = max(highest, e.ProducerID)
				}
			}
		}
	}
	b.pids.after = highest
}
