package control

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/state"
	syncacls "github.com/kmirror/kmirror/sync/acls"
)

// aclRules reads a mirror's acls.include. The prototype's tests spell it
// mirror.acl.include, the spec acls.include; all four spellings are taken,
// the first set one wins, unset means every ACL ("*").
func aclRules(m state.Mirror) ([]syncacls.Rule, error) {
	for _, name := range []string{"acls.include", "acl.include"} {
		if v, ok := listConfig(m, name); ok {
			return syncacls.ParseRules(strings.Join(v, ","))
		}
	}
	return syncacls.ParseRules("")
}

// aclDest is this node as the ACL sync of one mirror sees it: the
// broker's bindings, and the mirror's record (in state) of the bindings
// its sync created, which are the only ones it may delete.
type aclDest struct {
	Node   // ACLs, CreateACLs, DeleteACLs
	store  *state.Store
	mirror string
}

func (d aclDest) Synced() ([]state.ACL, error)        { return d.store.SyncedACLs(d.mirror) }
func (d aclDest) RecordSynced(acls []state.ACL) error { return d.store.PutSyncedACLs(d.mirror, acls) }
func (d aclDest) ForgetSynced(acls []state.ACL) error {
	return d.store.DeleteSyncedACLs(d.mirror, acls)
}

// failedOver reports whether every topic of m is stopped: the mirror has
// failed over, and the source no longer decides anything here (no ACL or
// group offset sync runs for it). A mirror without topics yet (created,
// waiting for discovery) is not failed over: its ACLs are synced ahead
// of its first topic.
func failedOver(m state.Mirror) bool {
	for _, desired := range m.Topics {
		if desired != state.StateStopped {
			return false
		}
	}
	return len(m.Topics) > 0
}

// frozenACLs is the ACL sync's frozen argument for m: the bindings that
// cover a stopped topic of m (sync/acls' package doc says why a prefixed
// or wildcard binding counts too).
func frozenACLs(m state.Mirror) func(state.ACL) bool {
	var stopped []string
	for t, desired := range m.Topics {
		if desired == state.StateStopped {
			stopped = append(stopped, t)
		}
	}
	return func(a state.ACL) bool {
		for _, t := range stopped {
			if syncacls.CoversTopic(a, t) {
				return true
			}
		}
		return false
	}
}

// syncACLs runs the ACL part of one cycle for m. The source is read
// without a lock; the bindings change under the mirror's lock (and
// localMu: the node's ACLs are every mirror's), against the mirror as
// stored then: a stop that ran meanwhile has frozen its topic's bindings,
// and a delete of the mirror (which drops its record under its lock)
// cannot interleave with the record's writes.
func (c *Plane) syncACLs(m state.Mirror, src *kadm.Client) (syncacls.Result, error) {
	if _, err := aclRules(m); err != nil || failedOver(m) {
		return syncacls.Result{}, err
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	source, ok, err := syncacls.ReadSource(ctx, src)
	cancel()
	if err != nil || !ok {
		return syncacls.Result{}, err
	}
	defer c.lockMirror(m.Name)()
	c.localMu.Lock()
	defer c.localMu.Unlock()
	cur, err := c.store.GetMirror(m.Name)
	if err != nil || failedOver(cur) {
		return syncacls.Result{}, nil // deleted or failed over meanwhile
	}
	rules, err := aclRules(cur)
	if err != nil {
		return syncacls.Result{}, err
	}
	return syncacls.Apply(aclDest{Node: c.b, store: c.store, mirror: cur.Name}, source, rules, frozenACLs(cur))
}
