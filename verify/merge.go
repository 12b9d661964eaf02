package verify

import "fmt"

// header is what the audit keeps of one batch: the tuple it compares, the
// batch's size for the byte counts, and whether its bytes match its
// CRC32C.
type header struct {
	base, last int64
	length     int32
	crc        uint32
	// damaged: the CRC32C recomputed over the batch differs from the
	// one in its header.
	damaged bool
}

// size is the whole batch's size in bytes.
func (h header) size() int64 { return 12 + int64(h.length) }

// same reports whether a and b are the same batch.
func (h header) same(o header) bool {
	return h.base == o.base && h.last == o.last && h.length == o.length && h.crc == o.crc && !h.damaged && !o.damaged
}

// Reasons a range of offsets is held by one side only (package doc).
const (
	ReasonSourceLogStart   = "source-log-start"
	ReasonAfterSourceEnd   = "after-source-end"
	ReasonWrittenAfterStop = "written-after-stop"
	ReasonSourceLacks      = "source-lacks-batch"
	ReasonCopyLacks        = "copy-lacks-batch"
	ReasonBeforeCopyStart  = "before-copy-start"
	ReasonAfterCopyEnd     = "after-copy-end"
	ReasonSourceAfterStop  = "source-after-stop"
)

// Range is the offsets First to Last, both included, held by one side
// only, and why.
type Range struct {
	First  int64  `json:"first"`
	Last   int64  `json:"last"`
	Reason string `json:"reason"`
}

func (r Range) String() string { return fmt.Sprintf("%d..%d(%s)", r.First, r.Last, r.Reason) }

// maxRanges is how many ranges of one kind a Result keeps; the others are
// counted (Ranges.More), so a partition that differs everywhere still
// takes bounded memory.
const maxRanges = 8

// Ranges is a bounded list of ranges in offset order.
type Ranges struct {
	List []Range
	// More is how many ranges were left out of List.
	More int
}

// add appends r, or extends the last range when coalesce is set and the
// reasons match (consecutive batches held by one side only are one range).
func (rs *Ranges) add(r Range, coalesce bool) {
	if n := len(rs.List); coalesce && n > 0 && rs.List[n-1].Reason == r.Reason && rs.More == 0 {
		rs.List[n-1].Last = max(rs.List[n-1].Last, r.Last)
		return
	}
	if len(rs.List) == maxRanges {
		rs.More++
		return
	}
	rs.List = append(rs.List, r)
}

// cursor yields one side's batches of the window in offset order: ok is
// false at the end. An error ends the side's stream.
type cursor interface {
	next() (h header, ok bool, err error)
}

// merger compares two cursors' batches (source a, copy b) and records the
// outcome in res.
type merger struct {
	res *Result
	// lastMissing, lastOnly: the previous event appended to that list,
	// so that a run of one-sided batches coalesces into one range.
	lastMissing, lastOnly bool
}

// differ notes a difference at offset off.
func (m *merger) differ(off int64) {
	m.res.DifferingBatches++
	if m.res.FirstDiff < 0 || off < m.res.FirstDiff {
		m.res.FirstDiff = off
	}
}

// run merges a and b to their ends. A cursor error is returned as is,
// after the batches before it were compared.
func (m *merger) run(a, b cursor) error {
	sa, okA, err := a.next()
	if err != nil {
		return err
	}
	sb, okB, err := b.next()
	if err != nil {
		return err
	}
	// prevA, prevB: the last offset of the previous batch of each side,
	// to tell a batch missing on the other side from one whose
	// boundaries differ there.
	prevA, prevB := int64(-1), int64(-1)
	for okA || okB {
		switch {
		case okA && okB && sa.base == sb.base:
			m.lastMissing, m.lastOnly = false, false
			if sa.same(sb) {
				m.res.ComparedBatches++
				m.res.ComparedBytes += sa.size()
			} else {
				m.differ(sa.base)
				m.noteDamage(sa, sb)
			}
			prevA, prevB = sa.last, sb.last
			if sa, okA, err = a.next(); err != nil {
				return err
			}
			if sb, okB, err = b.next(); err != nil {
				return err
			}
		case okA && (!okB || sa.base < sb.base):
			m.differ(sa.base)
			m.noteDamage(sa, header{})
			if overlaps := okB && sb.base <= sa.last || prevB >= sa.base; !overlaps {
				m.res.MissingInCopy.add(Range{sa.base, sa.last, ReasonCopyLacks}, m.lastMissing)
				m.lastMissing, m.lastOnly = true, false
			} else {
				m.lastMissing, m.lastOnly = false, false
			}
			prevA = sa.last
			if sa, okA, err = a.next(); err != nil {
				return err
			}
		default:
			m.differ(sb.base)
			m.noteDamage(header{}, sb)
			if overlaps := okA && sa.base <= sb.last || prevA >= sb.base; !overlaps {
				m.res.OnlyInCopy.add(Range{sb.base, sb.last, ReasonSourceLacks}, m.lastOnly)
				m.lastMissing, m.lastOnly = false, true
			} else {
				m.lastMissing, m.lastOnly = false, false
			}
			prevB = sb.last
			if sb, okB, err = b.next(); err != nil {
				return err
			}
		}
	}
	return nil
}

// noteDamage says which side's batch failed its CRC32C, for the first few.
func (m *merger) noteDamage(src, cp header) {
	for _, s := range []struct {
		h    header
		side string
	}{{src, "source"}, {cp, "copy"}} {
		if s.h.damaged {
			m.res.note(fmt.Sprintf("the %s's batch at offset %d fails its CRC32C: its bytes are damaged", s.side, s.h.base))
		}
	}
}
