package broker

import (
	"sync"

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
