package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirrorapi"
)

// MirrorAdmin answers the mirror RPCs: the control plane.
type MirrorAdmin interface {
	Handle(req kmsg.Request) (kmsg.Response, error)
}

// SetMirrorAdmin installs the control plane. Until it is set the mirror
// RPCs close the connection, as an unknown key would.
func (b *Broker) SetMirrorAdmin(a MirrorAdmin) {
	b.mirrorMu.Lock()
	b.mirrorAdmin = a
	b.mirrorMu.Unlock()
}

var errNoMirrorAdmin = errors.New("broker: mirror RPCs are not served (no control plane)")

func (b *Broker) handleMirrorRPC(r *request) (kmsg.Response, error) {
	b.mirrorMu.RLock()
	a := b.mirrorAdmin
	b.mirrorMu.RUnlock()
	if a == nil {
		return nil, errNoMirrorAdmin
	}
	return a.Handle(r.kreq)
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
