package broker

import (
	"fmt"

	"github.com/kmirror/kmirror/netio"
)

// The CONTROLLER listener (controller.listener.names): the Kafka side of
// the node's meta.ControllerListener, whose port also carries the
// metadata log's Raft traffic. Kafka serves a different API set there:
// the requests other nodes send the controller, and nothing clients
// use. Each listener scope has its own ApiVersions (Kafka's
// ApiVersionManager per ListenerType), and a request for a key outside
// the listener's scope is refused by the socket server before any
// handler sees it (SocketServer's Processor.parseRequestHeader throws
// InvalidRequestException "Received request api key ... which is not
// enabled", and the connection is closed). We do the same on both sides:
//
//   - on the CONTROLLER listener, only controllerListenerAPIs are served
//     and advertised;
//   - on every other listener, the inter-node keys (controllerOnlyAPIs)
//     are neither served nor advertised.
//
// A key of either list that no handler registered yet (regKey) stays
// unsupported, as any unknown key. Helpers adding an inter-node API add
// its key to both lists; an API served on both kinds of listener goes in
// controllerListenerAPIs only.
//
// The CONTROLLER listener is PLAINTEXT only for now (Config.
// ControllerListener).

// controllerListenerAPIs are the keys served on the CONTROLLER listener.
var controllerListenerAPIs = []int16{
	apiVersionsKey,
	fetchKey,         // of __cluster_metadata, by observers (metadata_log_rpcs.go)
	fetchSnapshotKey, // of the metadata log's snapshot, by observers
	55,               // DescribeQuorum (kafka-metadata-quorum.sh --bootstrap-controller)
	56,               // AlterPartition
	60,               // DescribeCluster
	58,               // Envelope
	62,               // BrokerRegistration
	63,               // BrokerHeartbeat
	67,               // AllocateProducerIds
	101,              // WriteMirrorStates (KIP-1279's)
	105,              // BumpLeaderEpochs (KIP-1279's)
}

// controllerOnlyAPIs are the inter-node keys, refused on every listener
// but the CONTROLLER one.
var controllerOnlyAPIs = []int16{56, 58, fetchSnapshotKey, 62, 63, 67, 101, 105}

// listenerScope is which API keys a listener serves.
type listenerScope uint8

const (
	scopeBroker     listenerScope = iota // every listener of Config.Listeners
	scopeController                      // Config.ControllerListener
)

// scopeKeys[scope][key] reports whether a listener of that scope serves
// key (when a handler is registered for it); built once from the lists
// above.
var scopeKeys = func() (t [2][maxAPIKey]bool) {
	for k := range t[scopeBroker] {
		t[scopeBroker][k] = true
	}
	for _, k := range controllerOnlyAPIs {
		t[scopeBroker][k] = false
	}
	for _, k := range controllerListenerAPIs {
		t[scopeController][k] = true
	}
	return t
}()

// scope is the scope of the listener c came in on.
func (b *Broker) scope(c *netio.Conn) listenerScope {
	if b.cfg.ControllerConns != nil && c.Listener() == b.cfg.ControllerListenerName {
		return scopeController
	}
	return scopeBroker
}

// serves reports whether a listener of scope s serves key.
func (s listenerScope) serves(key int16) bool {
	return key >= 0 && int(key) < maxAPIKey && scopeKeys[s][key]
}

// controllerNetioListener is the CONTROLLER listener as netio serves it,
// none when the node has none.
func controllerNetioListener(cfg Config) []netio.Listener {
	if cfg.ControllerConns == nil {
		return nil
	}
	return []netio.Listener{{Name: cfg.ControllerListenerName, Conns: cfg.ControllerConns}}
}

// errNotInScope closes a connection that asks a listener for a key
// outside its scope, as Kafka's socket server does.
func errNotInScope(key, version int16, listener string) error {
	return fmt.Errorf("%w: key %d (%s) v%d is not enabled on listener %s", errUnsupported, key, nameForKey(key), version, listener)
}
