package broker

import (
	"crypto/tls"
	"fmt"
	"maps"
	"strings"

	"github.com/kmirror/kmirror/internal/clientauth"
)

// Keystore reload (Kafka's dynamic listener.name.<l>.ssl.keystore.*): TLS
// listeners present the certificate in b.tlsCert, read at every handshake
// (tls.Config.GetCertificate), so an operator renews a certificate by
// writing the new PEM file and setting listener.name.<l>.ssl.keystore.location
// again (or to a new path), without a restart, as with Kafka.
//
// The keystore configs of the listener after the update (the update over
// this node's dynamic values over the cluster default's) are loaded before
// anything is stored: a keystore that does not load refuses the update
// with Kafka's message, and the certificate in use stays. kmirror's TLS
// listeners share one certificate: a reload through any listener's
// prefix replaces it for all of them.

// keystoreConfigs are the per-listener configs a certificate is loaded from.
var keystoreConfigs = []string{"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain",
	"ssl.keystore.key", "ssl.key.password"}

// listenerKeystoreConfig splits listener.name.<l>.<config> when config is
// a keystore config.
func listenerKeystoreConfig(name string) (listener, config string, ok bool) {
	rest, found := strings.CutPrefix(name, "listener.name.")
	if !found {
		return "", "", false
	}
	listener, config, found = strings.Cut(rest, ".")
	for _, k := range keystoreConfigs {
		if found && config == k {
			return strings.ToUpper(listener), config, true
		}
	}
	return "", "", false
}

// tlsListenerConfig returns the TLS config the listeners get: the static
// one with its certificate served from b.tlsCert. nil without TLS.
func (b *Broker) tlsListenerConfig() *tls.Config {
	static := b.cfg.Security.TLS
	if static == nil || len(static.Certificates) == 0 {
		return static
	}
	b.tlsCert.Store(&static.Certificates[0])
	c := static.Clone()
	c.Certificates = nil
	c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return b.tlsCert.Load(), nil }
	return c
}

// hasTLSListener reports whether this node has a TLS listener of that name.
func (b *Broker) hasTLSListener(name string) bool {
	for _, l := range b.cfg.Listeners {
		if l.Name == name {
			return strings.HasSuffix(b.listenerProtocol(name), "SSL")
		}
	}
	return false
}

// reloadKeystores loads the certificate of the TLS listener whose keystore
// configs set touches and installs it; keystore configs of listeners this
// node does not serve over TLS are only stored. REQUIRES: b.adminMu held.
func (b *Broker) reloadKeystores(node bool, set map[string]string) error {
	var listener string
	for name := range set {
		if l, _, ok := listenerKeystoreConfig(name); ok {
			listener = l
		}
	}
	if listener == "" {
		return nil
	}
	if b.tlsCert.Load() == nil || !b.hasTLSListener(listener) {
		return nil // not a TLS listener of this node: stored and described only
	}
	merged := maps.Clone(b.dynamicSnapshot())
	if merged == nil {
		merged = map[string]string{}
	}
	if node {
		maps.Copy(merged, b.nodeSnapshot())
	}
	maps.Copy(merged, set)
	prefix := "listener.name." + strings.ToLower(listener) + "."
	ks := map[string]string{}
	for _, k := range keystoreConfigs {
		if v, ok := merged[prefix+k]; ok {
			ks[k] = v
		}
	}
	if ks["ssl.keystore.location"] == "" && ks["ssl.keystore.certificate.chain"] == "" {
		return fmt.Errorf("%w: Validation of dynamic config update of SSLFactory failed: %sssl.keystore.location "+
			"(or ssl.keystore.certificate.chain and ssl.keystore.key) is required", errInvalidBrokerConfig, prefix)
	}
	ks["security.protocol"] = "SSL" // clientauth builds TLS for TLS protocols only
	parsed, err := clientauth.Parse(ks)
	if err == nil && (parsed.TLS == nil || len(parsed.TLS.Certificates) == 0) {
		err = fmt.Errorf("no certificate")
	}
	if err != nil {
		return fmt.Errorf("%w: Validation of dynamic config update of SSLFactory failed: %v", errInvalidBrokerConfig, err)
	}
	cert := parsed.TLS.Certificates[0]
	b.tlsCert.Store(&cert)
	b.log.Info("TLS listener certificate reloaded", "listener", listener)
	return nil
}
