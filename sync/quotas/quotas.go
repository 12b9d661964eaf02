// Package quotas is the client-quota part of a mirror's metadata sync: it
// makes this node's client quotas (producer_byte_rate, consumer_byte_rate,
// request_percentage, ...) follow the source's, so that a DR target that
// takes the primary's traffic after a failover throttles it as the primary
// did.
//
// WHY a record: quotas set on this node by hand must survive the sync, so
// the sync owns only the quota keys it set itself, recorded per mirror
// (state's v1/mirror-quota/). Per entity and key:
//
//   - the source has the key, and this node does not, or holds it because
//     the sync set it: set to the source's value, owned;
//   - the source has the key, and this node holds it from another hand:
//     left as it is (counted as Kept), not owned;
//   - the source no longer has a key the sync owns: removed here, and
//     forgotten.
//
// Writes are ordered so that a crash part way never turns an owned key
// into one that looks set by hand: keys about to be set are recorded
// before they are set, and keys are removed here before they are
// forgotten.
package quotas

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/state"
)

// Dest is this node as the quota sync of one mirror sees it.
type Dest interface {
	// ClientQuotas returns every entity's quotas; the maps are read only.
	ClientQuotas() []state.ClientQuota
	// SetClientQuotas replaces each entity's quotas (none removes it).
	SetClientQuotas(put []state.ClientQuota) error
	// Synced returns the mirror's record of the keys it set.
	Synced() ([]state.ClientQuota, error)
	// RecordSynced replaces the record of each entity (none forgets it).
	RecordSynced(put []state.ClientQuota) error
}

// Result counts the keys a sync changed.
type Result struct {
	Set, Removed int
	// Kept counts source keys left alone because this node holds another
	// value set by hand.
	Kept int
}

// ReadSource reads every client quota of the source.
func ReadSource(ctx context.Context, src *kadm.Client) ([]state.ClientQuota, error) {
	described, err := src.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		return nil, fmt.Errorf("describing the source's client quotas: %w", err)
	}
	out := make([]state.ClientQuota, 0, len(described))
	for _, d := range described {
		e, err := entity(d.Entity)
		if err != nil {
			return nil, err
		}
		q := state.ClientQuota{Entity: e, Values: make(map[string]float64, len(d.Values))}
		for _, v := range d.Values {
			q.Values[v.Key] = v.Value
		}
		if len(q.Values) > 0 {
			out = append(out, q)
		}
	}
	return out, nil
}

// entity converts a described entity.
func entity(parts kadm.ClientQuotaEntity) (state.QuotaEntity, error) {
	var e state.QuotaEntity
	for _, p := range parts {
		n := state.QuotaName{Set: true, Default: p.Name == nil}
		if p.Name != nil {
			n.Name = *p.Name
		}
		switch p.Type {
		case "user":
			e.User = n
		case "client-id":
			e.ClientID = n
		case "ip":
			e.IP = n
		default:
			return e, fmt.Errorf("the source describes a quota entity of unknown type %q", p.Type)
		}
	}
	if !e.User.Set && !e.ClientID.Set && !e.IP.Set {
		return e, errors.New("the source describes a quota entity with no type")
	}
	return e, nil
}

// Apply makes dest's quotas follow source (see the package doc).
func Apply(d Dest, source []state.ClientQuota) (Result, error) {
	var res Result
	local := byEntity(d.ClientQuotas())
	synced, err := d.Synced()
	if err != nil {
		return res, err
	}
	owned := byEntity(synced)
	src := byEntity(source)

	// Per entity: the values to hold here, the record before the writes
	// (the final record plus the keys still to remove) and after.
	var set, recordFirst, recordAfter []state.ClientQuota
	entities := maps.Clone(src)
	for e := range owned {
		entities[e] = nil
	}
	for e := range entities {
		cur := maps.Clone(local[e])
		if cur == nil {
			cur = map[string]float64{}
		}
		rec := map[string]float64{}
		changed := false
		for k, v := range src[e] {
			lv, has := cur[k]
			if _, mine := owned[e][k]; has && !mine {
				if lv != v {
					res.Kept++
				}
				continue
			}
			if !has || lv != v {
				cur[k] = v
				changed = true
				res.Set++
			}
			rec[k] = v
		}
		first := maps.Clone(rec)
		for k, v := range owned[e] {
			if _, still := src[e][k]; still {
				continue
			}
			if _, has := cur[k]; has {
				delete(cur, k)
				changed = true
				res.Removed++
			}
			first[k] = v
		}
		if changed {
			set = append(set, state.ClientQuota{Entity: e, Values: cur})
		}
		recorded := owned[e]
		if !maps.Equal(first, recorded) {
			recordFirst = append(recordFirst, state.ClientQuota{Entity: e, Values: first})
			recorded = first
		}
		if !maps.Equal(rec, recorded) {
			recordAfter = append(recordAfter, state.ClientQuota{Entity: e, Values: rec})
		}
	}
	if len(recordFirst) > 0 {
		if err := d.RecordSynced(recordFirst); err != nil {
			return Result{}, err
		}
	}
	if len(set) > 0 {
		if err := d.SetClientQuotas(set); err != nil {
			return Result{}, err
		}
	}
	if len(recordAfter) > 0 {
		if err := d.RecordSynced(recordAfter); err != nil {
			return res, err
		}
	}
	return res, nil
}

func byEntity(qs []state.ClientQuota) map[state.QuotaEntity]map[string]float64 {
	m := make(map[state.QuotaEntity]map[string]float64, len(qs))
	for _, q := range qs {
		m[q.Entity] = q.Values
	}
	return m
}
