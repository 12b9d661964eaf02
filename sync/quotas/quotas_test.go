package quotas

import (
	"errors"
	"maps"
	"testing"

	"github.com/kmirror/kmirror/state"
)

// fakeDest is a node's quotas and a mirror's record, in memory.
type fakeDest struct {
	local, synced map[state.QuotaEntity]map[string]float64
	failSet       bool
}

func newFake() *fakeDest {
	return &fakeDest{local: map[state.QuotaEntity]map[string]float64{}, synced: map[state.QuotaEntity]map[string]float64{}}
}

func list(m map[state.QuotaEntity]map[string]float64) []state.ClientQuota {
	var out []state.ClientQuota
	for e, vs := range m {
		out = append(out, state.ClientQuota{Entity: e, Values: vs})
	}
	return out
}

func put(m map[state.QuotaEntity]map[string]float64, qs []state.ClientQuota) {
	for _, q := range qs {
		if len(q.Values) == 0 {
			delete(m, q.Entity)
		} else {
			m[q.Entity] = maps.Clone(q.Values)
		}
	}
}

func (f *fakeDest) ClientQuotas() []state.ClientQuota        { return list(f.local) }
func (f *fakeDest) Synced() ([]state.ClientQuota, error)     { return list(f.synced), nil }
func (f *fakeDest) RecordSynced(q []state.ClientQuota) error { put(f.synced, q); return nil }
func (f *fakeDest) SetClientQuotas(q []state.ClientQuota) error {
	if f.failSet {
		return errors.New("disk full")
	}
	put(f.local, q)
	return nil
}

var (
	alice = state.QuotaEntity{User: state.QuotaName{Set: true, Name: "alice"}}
	bob   = state.QuotaEntity{User: state.QuotaName{Set: true, Name: "bob"}}
	deflt = state.QuotaEntity{ClientID: state.QuotaName{Set: true, Default: true}}
)

func src(qs ...state.ClientQuota) []state.ClientQuota { return qs }
func q(e state.QuotaEntity, kv ...any) state.ClientQuota {
	vs := map[string]float64{}
	for i := 0; i < len(kv); i += 2 {
		vs[kv[i].(string)] = kv[i+1].(float64)
	}
	return state.ClientQuota{Entity: e, Values: vs}
}

func apply(t *testing.T, d *fakeDest, source []state.ClientQuota, want Result) {
	t.Helper()
	got, err := Apply(d, source)
	if err != nil || got != want {
		t.Fatalf("Apply: %+v, %v; want %+v", got, err, want)
	}
}

func check(t *testing.T, m map[state.QuotaEntity]map[string]float64, e state.QuotaEntity, want map[string]float64) {
	t.Helper()
	if !maps.Equal(m[e], want) {
		t.Fatalf("%+v: %v, want %v", e, m[e], want)
	}
}

// The source's quotas are copied and followed; quotas set here by hand
// are never changed or removed.
func TestApply(t *testing.T) {
	t.Parallel()
	d := newFake()
	d.local[bob] = map[string]float64{"producer_byte_rate": 500}

	apply(t, d, src(q(alice, "producer_byte_rate", 1024.0), q(bob, "producer_byte_rate", 900.0), q(deflt, "request_percentage", 50.0)),
		Result{Set: 2, Kept: 1})
	check(t, d.local, alice, map[string]float64{"producer_byte_rate": 1024})
	check(t, d.local, bob, map[string]float64{"producer_byte_rate": 500})
	check(t, d.local, deflt, map[string]float64{"request_percentage": 50})
	check(t, d.synced, alice, map[string]float64{"producer_byte_rate": 1024})
	check(t, d.synced, bob, nil)

	// Nothing changed: nothing written.
	apply(t, d, src(q(alice, "producer_byte_rate", 1024.0), q(bob, "producer_byte_rate", 900.0), q(deflt, "request_percentage", 50.0)),
		Result{Kept: 1})

	// A hand-set key on a synced entity stays when the source changes.
	d.local[alice]["consumer_byte_rate"] = 7
	apply(t, d, src(q(alice, "producer_byte_rate", 2048.0), q(deflt, "request_percentage", 50.0)), Result{Set: 1})
	check(t, d.local, alice, map[string]float64{"producer_byte_rate": 2048, "consumer_byte_rate": 7})

	// Gone at the source: removed here, the hand-set key kept.
	apply(t, d, src(), Result{Removed: 2})
	check(t, d.local, alice, map[string]float64{"consumer_byte_rate": 7})
	check(t, d.local, deflt, nil)
	check(t, d.local, bob, map[string]float64{"producer_byte_rate": 500})
	if len(d.synced) != 0 {
		t.Fatalf("record after everything was removed: %v", d.synced)
	}
}

// A failure between the record and the quotas leaves keys owned, so the
// next cycle finishes the work instead of taking them for hand-set ones.
func TestApplyAfterAFailedWrite(t *testing.T) {
	t.Parallel()
	d := newFake()
	d.failSet = true
	if _, err := Apply(d, src(q(alice, "producer_byte_rate", 1024.0))); err == nil {
		t.Fatal("a failed write was not reported")
	}
	check(t, d.synced, alice, map[string]float64{"producer_byte_rate": 1024})
	d.failSet = false
	apply(t, d, src(q(alice, "producer_byte_rate", 1024.0)), Result{Set: 1})
	check(t, d.local, alice, map[string]float64{"producer_byte_rate": 1024})

	// And removals: removed here first, forgotten after.
	d.failSet = true
	if _, err := Apply(d, src()); err == nil {
		t.Fatal("a failed removal was not reported")
	}
	check(t, d.synced, alice, map[string]float64{"producer_byte_rate": 1024})
	d.failSet = false
	apply(t, d, src(), Result{Removed: 1})
	check(t, d.local, alice, nil)
	check(t, d.synced, alice, nil)
}
