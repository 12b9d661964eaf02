package broker

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/state"
)

// Client quotas, enforced as Kafka's ClientQuotaManager and
// ClientRequestQuotaManager enforce them.
//
// Three quota types are enforced: producer_byte_rate (the bytes of each
// Produce request), consumer_byte_rate (the bytes of each consumer Fetch
// response) and request_percentage (the time this broker spends serving a
// client's requests, 100 = one request thread's whole time). A quota
// applies to a (user, client id) pair through the first entity of this
// list that sets it, Kafka's precedence:
//
//	user + client-id, user + default client-id, user,
//	default user + client-id, default user + default client-id,
//	default user, client-id, default client-id
//
// The user is the principal's name without "User:" (ANONYMOUS on an
// unauthenticated connection). Usage is counted per resolved (user, client
// id) pair as Kafka's metric tags are: a user-level quota is shared by
// every client id of that user, a client-id quota by every user of it,
// and a default quota is per user (or client id), never one pool.
//
// A rate is measured over quota.window.num samples of
// quota.window.size.seconds (Kafka's Rate over a SampledStat): the sum of
// the live samples divided by their span, counted as at least
// quota.window.num-1 whole windows so a client's first burst is not
// measured over a few milliseconds. When a recorded value takes the rate
// over the quota, the throttle time is how long the client must stay
// silent for the rate to fall back to it:
//
//	throttle = (rate - quota) / quota * window span
//
// The request_percentage throttle is capped at one window, as Kafka's.
// A negative quota never throttles (the formula's result is negative, as
// in Kafka); a quota of 0 throttles every request for the whole measured
// span (quota.window.num x quota.window.size.seconds), where Kafka's
// formula divides by zero.
//
// Cost when no quota is set: one atomic load per request (quotaSet.on),
// no map lookup, no clock read.

// Quota kinds, indexes of the per-kind tables.
const (
	quotaProduce = iota
	quotaFetch
	quotaRequest
	numQuotaKinds
)

// Kafka's quota keys. These are what AlterClientQuotas accepts.
const (
	quotaKeyProducerByteRate       = "producer_byte_rate"
	quotaKeyConsumerByteRate       = "consumer_byte_rate"
	quotaKeyRequestPercentage      = "request_percentage"
	quotaKeyControllerMutationRate = "controller_mutation_rate"
	quotaKeyConnectionCreationRate = "connection_creation_rate"
)

// QuotaNames names the enforced quotas, by their index in
// Stats.Throttled: Kafka's quota types.
var QuotaNames = [numQuotaKinds]string{"produce", "fetch", "request"}

var quotaKindKeys = [numQuotaKinds]string{quotaKeyProducerByteRate, quotaKeyConsumerByteRate, quotaKeyRequestPercentage}

// Defaults of quota.window.num and quota.window.size.seconds.
const (
	DefaultQuotaWindowNum  = 11
	DefaultQuotaWindowSize = time.Second
)

// quotaSensorIdle is how long an unused sensor is kept (Kafka expires
// quota sensors after an hour of inactivity).
const quotaSensorIdle = time.Hour

// quotaSet is the node's client quotas and the usage measured against them.
//
// Locks: mu guards the quotas (AlterClientQuotas takes it under
// Broker.adminMu); sensorMu the sensor maps; each sensor's mu its samples.
// None is held while taking another: sensor returns before the caller
// takes the sensor's mu.
type quotaSet struct {
	// on is true while any enforced quota is set: the fast path's only
	// check.
	on atomic.Bool

	windowMs int64
	samples  int

	mu sync.RWMutex
	// entities are the stored quotas by entity, every key (those not
	// enforced too), as DescribeClientQuotas shows them.
	entities map[state.QuotaEntity]map[string]float64

	sensorMu sync.Mutex
	sensors  [numQuotaKinds]map[quotaTags]*quotaSensor
}

// quotaTags names the usage a quota is measured on: the user and client
// id the resolved entity names ("" for a type it does not have), as
// Kafka's quota metric tags.
type quotaTags struct {
	user, clientID string
}

func newQuotaSet(windowNum int, windowSize time.Duration, stored []state.ClientQuota) *quotaSet {
	q := &quotaSet{windowMs: windowSize.Milliseconds(), samples: windowNum,
		entities: map[state.QuotaEntity]map[string]float64{}}
	for i := range q.sensors {
		q.sensors[i] = map[quotaTags]*quotaSensor{}
	}
	for _, c := range stored {
		q.entities[c.Entity] = c.Values
	}
	q.refreshOn()
	return q
}

// set replaces an entity's quotas (none removes it).
func (q *quotaSet) set(e state.QuotaEntity, values map[string]float64) {
	q.mu.Lock()
	if len(values) == 0 {
		delete(q.entities, e)
	} else {
		q.entities[e] = values
	}
	q.mu.Unlock()
	q.refreshOn()
}

// replaceAll makes stored the quotas (reloading them from the store).
func (q *quotaSet) replaceAll(stored []state.ClientQuota) {
	next := make(map[state.QuotaEntity]map[string]float64, len(stored))
	for _, c := range stored {
		next[c.Entity] = c.Values
	}
	q.mu.Lock()
	q.entities = next
	q.mu.Unlock()
	q.refreshOn()
}

func (q *quotaSet) refreshOn() {
	q.mu.RLock()
	on := false
	for e, vs := range q.entities {
		if e.IP.Set {
			continue
		}
		for _, k := range quotaKindKeys {
			if _, ok := vs[k]; ok {
				on = true
			}
		}
	}
	q.mu.RUnlock()
	q.on.Store(on)
}

// quotaUser is the quota user of a principal: its name without the type,
// as Kafka's quota entities name users.
func quotaUser(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return principal
}

func named(n string) state.QuotaName { return state.QuotaName{Set: true, Name: n} }

var defaultName = state.QuotaName{Set: true, Default: true}

// resolve finds the quota of kind for (user, clientID) by Kafka's
// precedence, and the tags its usage is counted under.
func (q *quotaSet) resolve(kind int, user, clientID string) (limit float64, tags quotaTags, ok bool) {
	key := quotaKindKeys[kind]
	u, c := named(user), named(clientID)
	var none state.QuotaName
	levels := [...]struct {
		e    state.QuotaEntity
		tags quotaTags
	}{
		{state.QuotaEntity{User: u, ClientID: c}, quotaTags{user, clientID}},
		{state.QuotaEntity{User: u, ClientID: defaultName}, quotaTags{user, clientID}},
		{state.QuotaEntity{User: u, ClientID: none}, quotaTags{user, ""}},
		{state.QuotaEntity{User: defaultName, ClientID: c}, quotaTags{user, clientID}},
		{state.QuotaEntity{User: defaultName, ClientID: defaultName}, quotaTags{user, clientID}},
		{state.QuotaEntity{User: defaultName, ClientID: none}, quotaTags{user, ""}},
		{state.QuotaEntity{User: none, ClientID: c}, quotaTags{"", clientID}},
		{state.QuotaEntity{User: none, ClientID: defaultName}, quotaTags{"", clientID}},
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	for _, l := range levels {
		if (user == "" && l.e.User == u) || (clientID == "" && l.e.ClientID == c) {
			continue // an empty name never names an entity; only defaults match
		}
		if v, found := q.entities[l.e][key]; found {
			return v, l.tags, true
		}
	}
	return 0, quotaTags{}, false
}

// record adds value to the usage of (user, clientID) for kind at now and
// returns the throttle time, 0 when within the quota or none is set.
func (q *quotaSet) record(kind int, user, clientID string, value float64, now time.Time) time.Duration {
	limit, tags, ok := q.resolve(kind, user, clientID)
	if !ok {
		return 0
	}
	ms := q.sensor(kind, tags, now).record(q, value, limit, now.UnixMilli())
	if kind == quotaRequest {
		ms = min(ms, q.windowMs)
	}
	return time.Duration(ms) * time.Millisecond
}

// fetchMaxBytes is the most a consumer fetch may return for (user,
// clientID): a response larger than the quota allows in the whole window
// would throttle whatever came before (Kafka's maxValueInQuotaWindow).
// math.MaxInt32 when no quota applies.
func (q *quotaSet) fetchMaxBytes(user, clientID string) int32 {
	limit, _, ok := q.resolve(quotaFetch, user, clientID)
	if !ok {
		return math.MaxInt32
	}
	v := limit * float64(q.samples-1) * float64(q.windowMs) / 1000
	if v >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(max(v, 0))
}

func (q *quotaSet) sensor(kind int, tags quotaTags, now time.Time) *quotaSensor {
	q.sensorMu.Lock()
	defer q.sensorMu.Unlock()
	m := q.sensors[kind]
	s := m[tags]
	if s == nil {
		if len(m) > 1024 {
			// Forget sensors idle past Kafka's expiry, so client ids that
			// come and go do not grow the map without bound.
			for k, old := range m {
				if now.Sub(old.lastUsed) > quotaSensorIdle {
					delete(m, k)
				}
			}
		}
		s = &quotaSensor{samples: make([]quotaSample, 0, q.samples)}
		m[tags] = s
	}
	s.lastUsed = now
	return s
}

// quotaSensor is one usage's samples (Kafka's SampledStat for a Rate).
type quotaSensor struct {
	mu       sync.Mutex
	samples  []quotaSample
	current  int
	lastUsed time.Time // guarded by quotaSet.sensorMu
}

type quotaSample struct {
	startMs int64
	value   float64
}

// record adds value at nowMs and returns the throttle time in ms, 0 when
// the rate stays within limit.
func (s *quotaSensor) record(q *quotaSet, value, limit float64, nowMs int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		s.samples = append(s.samples, quotaSample{startMs: nowMs})
	}
	if nowMs-s.samples[s.current].startMs >= q.windowMs {
		s.current = (s.current + 1) % q.samples
		if s.current >= len(s.samples) {
			s.samples = append(s.samples, quotaSample{startMs: nowMs})
		} else {
			s.samples[s.current] = quotaSample{startMs: nowMs}
		}
	}
	s.samples[s.current].value += value
	// Samples older than the whole window no longer count.
	total, oldest := 0.0, nowMs
	for i := range s.samples {
		sm := &s.samples[i]
		if nowMs-sm.startMs >= int64(q.samples)*q.windowMs {
			*sm = quotaSample{startMs: nowMs}
		}
		total += sm.value
		oldest = min(oldest, sm.startMs)
	}
	span := nowMs - oldest
	if full := span / q.windowMs; full < int64(q.samples-1) {
		span += (int64(q.samples-1) - full) * q.windowMs
	}
	span = max(span, 1)
	rate := total / (float64(span) / 1000)
	if rate <= limit {
		return 0
	}
	if limit == 0 {
		// Kafka's formula divides by zero here (and its int cast of the
		// result then throttles nothing); a quota of 0 means "stop this
		// client", so it is held for the whole measured span each time.
		return int64(q.samples) * q.windowMs
	}
	t := math.Round((rate - limit) / limit * float64(span))
	switch {
	case math.IsNaN(t) || t <= 0:
		return 0
	case t >= math.MaxInt32:
		return math.MaxInt32
	}
	return int64(t)
}

// ClientQuotas returns every entity's quotas, as DescribeClientQuotas sees
// them (for the mirror sync). The maps are shared: callers must not
// modify them.
func (b *Broker) ClientQuotas() []state.ClientQuota { return b.quotas.snapshot() }

// SetClientQuotas replaces the quotas of each entity in put (an entity
// with none is removed), stored first, then enforced, as AlterClientQuotas
// does.
func (b *Broker) SetClientQuotas(put []state.ClientQuota) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if err := b.store.PutClientQuotas(put); err != nil {
		return err
	}
	for _, q := range put {
		b.quotas.set(q.Entity, q.Values)
	}
	return nil
}
