package broker

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Fetch sessions (KIP-227). A client opens a session with a full fetch
// (session id 0, epoch 0); later fetches (epoch 1, 2, ...) list only the
// partitions whose fetch position changed and the partitions to forget, and
// the response lists only the partitions with news. The session remembers
// every partition's position and what the client last saw.
const (
	// fetchSessionSlots is max.incremental.fetch.session.cache.slots.
	fetchSessionSlots = 1000
	// fetchSessionIdle evicts sessions unused this long
	// (min.incremental.fetch.session.eviction.ms).
	fetchSessionIdle = 120 * time.Second

	sessionEpochInitial = 0
	sessionEpochFinal   = -1
)

// sessionKey names a partition in a session: by topic ID for Fetch v13+,
// by name before.
type sessionKey struct {
	topicID   [16]byte
	topic     string
	partition int32
}

// sessionPart is a partition's position in a session and what its last
// response said, to tell whether the next incremental response must list it.
type sessionPart struct {
	key              sessionKey
	fetchOffset      int64
	maxBytes         int32
	currentEpoch     int32
	lastFetchedEpoch int32
	// Last values sent to the client; -1 before the first response.
	sentHW, sentLSO, sentLogStart int64
}

type fetchSession struct {
	mu       sync.Mutex
	id       int32
	epoch    int32 // the epoch the next request must carry
	parts    []*sessionPart
	index    map[sessionKey]int
	lastUsed time.Time
}

// upsert adds or updates a partition's position.
func (s *fetchSession) upsert(sp sessionPart) *sessionPart {
	if i, ok := s.index[sp.key]; ok {
		p := s.parts[i]
		p.fetchOffset, p.maxBytes = sp.fetchOffset, sp.maxBytes
		p.currentEpoch, p.lastFetchedEpoch = sp.currentEpoch, sp.lastFetchedEpoch
		return p
	}
	sp.sentHW, sp.sentLSO, sp.sentLogStart = -1, -1, -1
	// A copy, not &sp: taking the parameter's address would move it to
	// the heap on every call, updates of known partitions included.
	p := new(sessionPart)
	*p = sp
	s.index[sp.key] = len(s.parts)
	s.parts = append(s.parts, p)
	return p
}

// forget removes a partition.
func (s *fetchSession) forget(k sessionKey) {
	i, ok := s.index[k]
	if !ok {
		return
	}
	copy(s.parts[i:], s.parts[i+1:])
	s.parts[len(s.parts)-1] = nil
	s.parts = s.parts[:len(s.parts)-1]
	delete(s.index, k)
	for j := i; j < len(s.parts); j++ {
		s.index[s.parts[j].key] = j
	}
}

// fetchSessions is the broker's session cache.
type fetchSessions struct {
	mu       sync.Mutex
	slots    int
	sessions map[int32]*fetchSession
}

func newFetchSessions(slots int) *fetchSessions {
	return &fetchSessions{slots: slots, sessions: map[int32]*fetchSession{}}
}

// create opens a session, evicting the least recently used one when full.
// It returns nil when no slot can be had (then the fetch is sessionless).
func (c *fetchSessions) create(now time.Time) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.slots {
		var oldest *fetchSession
		var oldestUsed time.Time
		for _, s := range c.sessions {
			// lastUsed is guarded by s.mu. A session whose lock is taken
			// serves a fetch (maybe a long poll): it is not idle, and
			// waiting for it would stall every session lookup.
			if !s.mu.TryLock() {
				continue
			}
			if oldest == nil || s.lastUsed.Before(oldestUsed) {
				oldest, oldestUsed = s, s.lastUsed
			}
			s.mu.Unlock()
		}
		if oldest == nil || now.Sub(oldestUsed) < fetchSessionIdle {
			return nil
		}
		delete(c.sessions, oldest.id)
	}
	id := rand.Int32()
	for id == 0 || c.sessions[id] != nil {
		id = rand.Int32()
	}
	s := &fetchSession{id: id, epoch: 1, index: map[sessionKey]int{}, lastUsed: now}
	c.sessions[id] = s
	return s
}

func (c *fetchSessions) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
}

// expire drops sessions idle for fetchSessionIdle.
func (c *fetchSessions) expire(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, s := range c.sessions {
		// A locked session is serving a fetch, perhaps a long poll of
		// several seconds: not idle, and blocking here with c.mu held
		// would stall every fetch of every session until it ends.
		if !s.mu.TryLock() {
			continue
		}
		idle := now.Sub(s.lastUsed) >= fetchSessionIdle
		s.mu.Unlock()
		if idle {
			delete(c.sessions, id)
		}
	}
}
