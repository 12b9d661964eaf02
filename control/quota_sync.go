package control

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/state"
	syncquotas "github.com/kmirror/kmirror/sync/quotas"
)

// quotaSyncConfig turns the client-quota sync off (default on): a DR
// target takes the primary's traffic after a failover, and needs its
// quotas then.
const quotaSyncConfig = "mirror.client.quotas.sync.enable"

// quotaDest is this node as the quota sync of one mirror sees it: the
// broker's quotas and the mirror's record (in state) of the keys its sync
// set, the only ones it changes.
type quotaDest struct {
	Node   // ClientQuotas, SetClientQuotas
	store  *state.Store
	mirror string
}

func (d quotaDest) Synced() ([]state.ClientQuota, error) { return d.store.SyncedQuotas(d.mirror) }
func (d quotaDest) RecordSynced(put []state.ClientQuota) error {
	return d.store.PutSyncedQuotas(d.mirror, put)
}

// syncQuotas runs the client-quota part of one cycle for m. As for ACLs,
// the source is read without a lock and the quotas change under the
// mirror's lock and localMu, against
// the mirror as stored then; a mirror that has failed over is left alone:
// its quotas are the operator's from then on.
func (c *Plane) syncQuotas(m state.Mirror, src *kadm.Client) (syncquotas.Result, error) {
	if strings.EqualFold(m.Configs[quotaSyncConfig], "false") || failedOver(m) {
		return syncquotas.Result{}, nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	source, err := syncquotas.ReadSource(ctx, src)
	cancel()
	if err != nil {
		return syncquotas.Result{}, err
	}
	defer c.lockMirror(m.Name)()
	c.localMu.Lock()
	defer c.localMu.Unlock()
	cur, err := c.store.GetMirror(m.Name)
	if err != nil || failedOver(cur) || strings.EqualFold(cur.Configs[quotaSyncConfig], "false") {
		return syncquotas.Result{}, nil // deleted, failed over or turned off meanwhile
	}
	return syncquotas.Apply(quotaDest{Node: c.b, store: c.store, mirror: cur.Name}, source)
}
