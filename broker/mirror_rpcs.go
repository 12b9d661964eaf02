package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/mirrorapi"
)

// MirrorAdmin answers the mirror RPCs and serves the CLUSTER_MIRROR config
// resource (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs): the
// control plane.
type MirrorAdmin interface {
	Handle(req kmsg.Request) (kmsg.Response, error)
	// MirrorConfigs returns a mirror's configs; ok is false for no mirror.
	MirrorConfigs(name string) (configs map[string]string, ok bool)
	// ValidateMirrorConfig checks one value, and refuses a name no
	// mirror has.
	ValidateMirrorConfig(name, value string) error
	// MirrorConfigDef returns a mirror config's definition; ok is false
	// for a name no mirror has.
	MirrorConfigDef(name string) (def settings.Def, ok bool)
	// SetMirrorConfigs replaces a mirror's configs and applies them.
	SetMirrorConfigs(name string, configs map[string]string) error
}

// admin returns the control plane, nil when none runs.
func (b *Broker) admin() MirrorAdmin {
	b.mirrorMu.RLock()
	defer b.mirrorMu.RUnlock()
	return b.mirrorAdmin
}

// SetMirrorAdmin installs the control plane. Until it is set the mirror
// RPCs close the connection, as an unknown key would.
func (b *Broker) SetMirrorAdmin(a MirrorAdmin) {
	b.mirrorMu.Lock()
	b.mirrorAdmin = a
	b.mirrorMu.Unlock()
}

var errNoMirrorAdmin = errors.New("broker: mirror RPCs are not served (no control plane)")

// handleMirrorRPC serves every mirror RPC. Authorization (SPEC.md section
// 7) is the broker's: a refused request never reaches the control plane,
// and listings are filtered on their way back (mirrorRPCDenied,
// mirrorRPCFilter).
func (b *Broker) handleMirrorRPC(r *request) (kmsg.Response, error) {
	a := b.admin()
	if a == nil {
		return nil, errNoMirrorAdmin
	}
	az := b.authz(r)
	if resp := az.mirrorRPCDenied(r.kreq); resp != nil {
		return resp, nil
	}
	resp, err := a.Handle(r.kreq)
	if err != nil {
		return nil, err
	}
	az.mirrorRPCFilter(r.kreq, resp)
	if d, ok := r.kreq.(*mirrorapi.DescribeClusterMirrorsRequest); ok {
		b.describeClusterWide(d, resp.(*mirrorapi.DescribeClusterMirrorsResponse))
	}
	return resp, nil
}

// requestForKey returns a fresh request of key: mirrorapi's for the mirror
// keys (94 is also kmsg's UnregisterController, a KRaft controller API no
// client sends to a broker), kmsg's for the others.
func requestForKey(key int16) kmsg.Request {
	if r := mirrorapi.RequestForKey(key); r != nil {
		return r
	}
	return kmsg.RequestForKey(key)
}

// APIName names an API key as kmirror serves it (mirror keys included),
// for logs and metrics.
func APIName(key int16) string { return nameForKey(key) }

// nameForKey names an API key for logs.
func nameForKey(key int16) string {
	if n := mirrorapi.NameForKey(key); n != "" {
		return n
	}
	return kmsg.NameForKey(key)
}
