// Package share owns the state of share partitions (KIP-932) on their
// partition's leader: which records of the in-flight window, from the
// share-partition start offset (SPSO) to its end (SPEO), are available,
// acquired by a member (under an acquisition lock), acknowledged or
// archived, and how often each was delivered. ShareFetch acquires,
// ShareAcknowledge (or a ShareFetch's piggybacked acknowledgements)
// settles, and the start offset moves over the settled prefix.
//
// The package is pure logic: it reads no log and writes no store. The
// broker reads the batches from the offset Acquire asks for, and persists
// the start offset and the window (State) at every acknowledgement (group
// coordinator, group/share_offsets.go), so a new leader restores
// (Restore) what the old one had settled. Acquisitions are not persisted:
// a record acquired and not settled when its leader dies is delivered
// again at its earlier delivery count (at-least-once, as KIP-932).
package share

import (
	"fmt"
	"time"
)

// Acknowledge types (ShareAcknowledge, ShareFetch's acknowledgements).
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4 // v2 (KIP-1222): extend the acquisition lock
)

type recordState int8

const (
	available recordState = iota
	acquired
	acknowledged
	archived
)

// record is one offset of the in-flight window.
type record struct {
	state      recordState
	deliveries int16
	member     string
	deadline   time.Time
}

// Config is a share partition's settings (the group's).
type Config struct {
	// LockDuration is group.share.record.lock.duration.ms (30 s).
	LockDuration time.Duration
	// DeliveryLimit is group.share.delivery.count.limit (5): a record
	// released after this many deliveries is archived.
	DeliveryLimit int16
	// MaxLocks is group.share.partition.max.record.locks (2000): the
	// in-flight window's largest size.
	MaxLocks int
}

// Partition is one share partition. Its methods are safe for one caller
// at a time; the broker serializes them (one mutex per partition).
type Partition struct {
	cfg   Config
	start int64 // SPSO: every offset below is settled
	end   int64 // SPEO: the first offset never acquired
	// window holds the offsets [start, end) that exist in the log.
	window map[int64]*record
}

// New is a share partition that starts at start (the persisted SPSO, or
// where share.auto.offset.reset points).
func New(cfg Config, start int64) *Partition {
	return &Partition{cfg: cfg, start: start, end: start, window: map[int64]*record{}}
}

// SetConfig changes the settings (the group's configs changed); records
// acquired before keep their locks.
func (p *Partition) SetConfig(cfg Config) { p.cfg = cfg }

// Config is the partition's settings.
func (p *Partition) Config() Config { return p.cfg }

// Start is the share-partition start offset.
func (p *Partition) Start() int64 { return p.start }

// End is the share-partition end offset.
func (p *Partition) End() int64 { return p.end }

// Batch is a batch of the log as Acquire sees it: its offsets and whether
// it is a control batch (transaction markers are never delivered).
type Batch struct {
	Base, Last int64
	Control    bool
}

// Acquired is a run of acquired offsets with one delivery count.
type Acquired struct {
	First, Last   int64
	DeliveryCount int16
}

// NextRead is the offset the broker reads the log from for an Acquire:
// the first available offset of the window, else its end. ok is false when
// the window is full (MaxLocks) and holds nothing available.
func (p *Partition) NextRead(now time.Time) (offset int64, ok bool) {
	p.expire(now)
	for o := p.start; o < p.end; o++ {
		if r := p.window[o]; r != nil && r.state == available {
			return o, true
		}
	}
	return p.end, p.end-p.start < int64(p.cfg.MaxLocks)
}

// Acquire acquires for member up to maxRecords records of batches (read
// from from, NextRead's offset, up to what consumers may read) and returns the
// runs it acquired and the indexes of the batches that hold them (the
// response carries those batches whole; the member keeps only the
// acquired offsets). Whole batches are acquired, so maxRecords may be
// passed by the last one.
func (p *Partition) Acquire(member string, from int64, batches []Batch, maxRecords int, now time.Time) ([]Acquired, []int) {
	p.expire(now)
	// Available records the read skipped over are no longer in the log
	// (compacted away since they were first delivered): they are
	// archived, or the start offset would wait for them forever.
	cursor := from
	gone := func(upTo int64) {
		for o := cursor; o < upTo && o < p.end; o++ {
			if r := p.window[o]; r != nil && r.state == available {
				r.state = archived
			}
		}
	}
	var runs []Acquired
	var used []int
	count := 0
	add := func(o int64, deliveries int16) {
		if n := len(runs); n > 0 && runs[n-1].Last == o-1 && runs[n-1].DeliveryCount == deliveries {
			runs[n-1].Last = o
			return
		}
		runs = append(runs, Acquired{First: o, Last: o, DeliveryCount: deliveries})
	}
	full := false
	for i, b := range batches {
		if count >= maxRecords || full {
			break
		}
		gone(b.Base)
		cursor = max(cursor, b.Last+1)
		took := false
	offsets:
		for o := max(b.Base, p.start); o <= b.Last; o++ {
			r := p.window[o]
			switch {
			case r == nil && o < p.end:
				continue // not in the log (compacted away): nothing to deliver
			case r == nil:
				if o-p.start >= int64(p.cfg.MaxLocks) {
					full = true
					break offsets
				}
				// Offsets between the window's end and o are not in
				// the log: they need no settling.
				p.end = o + 1
				r = &record{}
				p.window[o] = r
				if b.Control {
					r.state = archived
					continue
				}
			case r.state != available:
				continue
			}
			r.state, r.member, r.deadline = acquired, member, now.Add(p.cfg.LockDuration)
			r.deliveries++
			add(o, r.deliveries)
			took = true
			count++
		}
		if b.Last >= p.end && !full {
			p.end = b.Last + 1
		}
		if took {
			used = append(used, i)
		}
	}
	p.advance()
	return runs, used
}

// ErrInvalidRecordState is an acknowledgement of records the member has
// not acquired (INVALID_RECORD_STATE).
var ErrInvalidRecordState = fmt.Errorf("share: the records are not acquired by this member")

// Acknowledge settles member's acquired offsets first to last: one type
// for all, or one per offset. A batch that names an offset the member
// does not hold is refused whole (ErrInvalidRecordState) and changes
// nothing. It reports whether the start offset moved.
func (p *Partition) Acknowledge(member string, first, last int64, types []int8, now time.Time) (moved bool, err error) {
	p.expire(now)
	switch {
	case last < first || len(types) == 0 || (len(types) != 1 && int64(len(types)) != last-first+1):
		return false, fmt.Errorf("share: acknowledgement of %d to %d with %d types", first, last, len(types))
	}
	typeOf := func(o int64) int8 {
		if len(types) == 1 {
			return types[0]
		}
		return types[o-first]
	}
	for o := first; o <= last; o++ {
		t := typeOf(o)
		if t < AckGap || t > AckRenew {
			return false, fmt.Errorf("share: acknowledge type %d", t)
		}
		r := p.window[o]
		if r == nil && t == AckGap && o >= p.start && o < p.end {
			continue // a gap the log has no record for
		}
		if r == nil || r.state != acquired || r.member != member {
			return false, ErrInvalidRecordState
		}
	}
	before := p.start
	for o := first; o <= last; o++ {
		r := p.window[o]
		if r == nil {
			continue
		}
		switch typeOf(o) {
		case AckGap, AckReject:
			r.state = archived
		case AckAccept:
			r.state = acknowledged
		case AckRelease:
			p.release(r)
		case AckRenew:
			r.deadline = now.Add(p.cfg.LockDuration)
		}
	}
	p.advance()
	return p.start != before, nil
}

// NextLockEnd is when the earliest acquisition lock still running ends;
// false when no record is acquired.
func (p *Partition) NextLockEnd(now time.Time) (time.Time, bool) {
	p.expire(now)
	var first time.Time
	for _, r := range p.window {
		if r.state == acquired && (first.IsZero() || r.deadline.Before(first)) {
			first = r.deadline
		}
	}
	return first, !first.IsZero()
}

// ReleaseMember releases every record member holds (its share session
// closed, or it left the group).
func (p *Partition) ReleaseMember(member string) {
	for _, r := range p.window {
		if r.state == acquired && r.member == member {
			p.release(r)
		}
	}
	p.advance()
}

// release makes r available again, or archives it once delivered
// DeliveryLimit times.
func (p *Partition) release(r *record) {
	r.member, r.deadline = "", time.Time{}
	if r.deliveries >= p.cfg.DeliveryLimit {
		r.state = archived
		return
	}
	r.state = available
}

// expire releases the records whose acquisition lock ended.
func (p *Partition) expire(now time.Time) {
	for _, r := range p.window {
		if r.state == acquired && now.After(r.deadline) {
			p.release(r)
		}
	}
	p.advance()
}

// advance moves the start offset over the settled prefix of the window.
func (p *Partition) advance() {
	for p.start < p.end {
		r := p.window[p.start]
		if r != nil && r.state != acknowledged && r.state != archived {
			return
		}
		delete(p.window, p.start)
		p.start++
	}
}

// SkipTo moves the start offset to offset when the log no longer holds
// what is below it (retention, DeleteRecords): records there cannot be
// delivered.
func (p *Partition) SkipTo(offset int64) {
	for o := p.start; o < offset && o < p.end; o++ {
		delete(p.window, o)
	}
	if offset > p.start {
		p.start = offset
		p.end = max(p.end, offset)
	}
}

// The in-flight window as the group's coordinator keeps it (Kafka's
// persisted delivery states): a leader that takes the partition over
// restores it, so records accepted past the start offset are not
// delivered again, and delivery counts go on. An acquired record is kept
// as available with its delivery count: its lock ends with the leader.
const (
	PersistedAvailable    int8 = 0
	PersistedAcknowledged int8 = 2
	PersistedArchived     int8 = 4
)

// StateBatch is a run of window offsets in one persisted state and
// delivery count.
type StateBatch struct {
	First, Last   int64
	State         int8
	DeliveryCount int16
}

// State is the window's offsets that the log holds, as runs.
func (p *Partition) State() []StateBatch {
	var out []StateBatch
	for o := p.start; o < p.end; o++ {
		r := p.window[o]
		if r == nil {
			continue
		}
		st := PersistedAvailable
		switch r.state {
		case acknowledged:
			st = PersistedAcknowledged
		case archived:
			st = PersistedArchived
		}
		if n := len(out); n > 0 && out[n-1].Last == o-1 && out[n-1].State == st && out[n-1].DeliveryCount == r.deliveries {
			out[n-1].Last = o
			continue
		}
		out = append(out, StateBatch{First: o, Last: o, State: st, DeliveryCount: r.deliveries})
	}
	return out
}

// Restore is a share partition at start with the window batches hold
// (what State gave its previous leader); offsets below start, and
// unknown states, are left out.
func Restore(cfg Config, start int64, batches []StateBatch) *Partition {
	p := New(cfg, start)
	for _, b := range batches {
		var st recordState
		switch b.State {
		case PersistedAvailable:
			st = available
		case PersistedAcknowledged:
			st = acknowledged
		case PersistedArchived:
			st = archived
		default:
			continue
		}
		for o := max(b.First, start); o <= b.Last && o-start < int64(cfg.MaxLocks); o++ {
			p.window[o] = &record{state: st, deliveries: b.DeliveryCount}
			p.end = max(p.end, o+1)
		}
	}
	p.advance()
	return p
}
