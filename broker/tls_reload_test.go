package broker

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/testcerts"
)

// TestKeystoreReload renews a TLS listener's certificate at runtime, as
// Kafka does: a new PEM file set as listener.name.ssl.ssl.keystore.location
// is presented from the next handshake on, no restart; a keystore that does
// not load is refused and the certificate in use stays.
func TestKeystoreReload(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	first, second := ca.Server(), ca.Server()
	b := newTestBroker(t, func(c *Config) {
		c.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1"}, {Name: "SSL", Host: "127.0.0.1"}}
		c.Security.TLS = &tls.Config{Certificates: []tls.Certificate{first.TLS}}
	})
	var sslAddr string
	for _, l := range b.Listeners() {
		if l.Name == "SSL" {
			sslAddr = l.Addr()
		}
	}
	presented := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", sslAddr, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"})
		if err != nil {
			t.Fatalf("TLS handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := presented(); got != first.TLS.Leaf.SerialNumber.String() {
		t.Fatalf("presented certificate %s, want the first one", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newTestClient(t, b))
	alter := func(location string) error {
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
			{Name: "listener.name.ssl.ssl.keystore.type", Value: kadm.StringPtr("PEM")},
			{Name: "listener.name.ssl.ssl.keystore.location", Value: kadm.StringPtr(location)}}, b.cfg.NodeID)
		if err != nil {
			return err
		}
		return resp[0].Err
	}
	if err := alter(testcerts.WriteFile(t, "second.pem", second.KeyPEM, second.CertPEM)); err != nil {
		t.Fatalf("setting the new keystore: %v", err)
	}
	if got := presented(); got != second.TLS.Leaf.SerialNumber.String() {
		t.Fatalf("presented certificate %s after the reload, want the second one", got)
	}
	if err := alter(testcerts.WriteFile(t, "garbage.pem", []byte("not a PEM file"))); err == nil {
		t.Fatal("a keystore that does not load was accepted")
	}
	if got := presented(); got != second.TLS.Leaf.SerialNumber.String() {
		t.Fatalf("presented certificate %s after a refused reload, want the second one still", got)
	}
}
