package broker

import (
	"fmt"
	"sync"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// producerIDBlock is how many producer ids one state write reserves (Kafka's
// controller hands out blocks of 1000 too).
const producerIDBlock = 1000

// producerIDs hands out producer ids from blocks reserved in state/, so an
// id is never reissued after a restart, and none reaches the range of
// rewritten mirror ids (DESIGN.md decision 2; state enforces the ceiling).
type producerIDs struct {
	store     *state.Store
	mu        sync.Mutex
	next, end int64
}

func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		first, err := p.store.AllocateProducerIDs(producerIDBlock)
		if err != nil {
			return -1, err
		}
		p.next, p.end = first, first+producerIDBlock
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
// REQUIRES: the topics are loaded, no request is served yet.
func (b *Broker) skipKnownProducerIDs() error {
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
	if highest < 0 {
		return nil
	}
	if err := b.store.SkipProducerIDsThrough(highest); err != nil {
		return fmt.Errorf("keeping producer ids above the logs' %d: %w", highest, err)
	}
	return nil
}
