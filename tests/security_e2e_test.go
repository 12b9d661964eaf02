package tests

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testcerts"
)

// secureNode starts a node with a PLAINTEXT listener (setup), a SASL_SSL
// and an SSL listener (client certificates required), PLAIN user alice
// and SCRAM user carol; it returns the node and the secured addresses.
func secureNode(t *testing.T, ca *testcerts.CA) (n *brokerNode, saslSSL, ssl string) {
	t.Helper()
	server := ca.Server()
	n = startNode(t, func(c *broker.Config) {
		c.Listeners = []broker.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1"},
			{Name: "SASL_SSL", Host: "127.0.0.1"}, {Name: "SSL", Host: "127.0.0.1"}}
		c.Security.TLS = &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientCAs: ca.Pool,
			ClientAuth: tls.VerifyClientCertIfGiven}
		c.Security.PlainUsers = map[string]string{"alice": "alice-pw"}
	})
	for _, l := range n.b.Listeners() {
		switch l.Name {
		case "SASL_SSL":
			saslSSL = l.Addr()
		case "SSL":
			ssl = l.Addr()
		}
	}
	ctx := testCtx(t, 20*time.Second)
	res, err := newAdmin(t, n.addr()).AlterUserSCRAMs(ctx, nil,
		[]kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-pw"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("creating SCRAM user carol: %v %v", err, res.Error())
	}
	return n, saslSSL, ssl
}

// kgo and kcat clients produce and consume over SASL_SSL (PLAIN and
// SCRAM-SHA-512) and over SSL with a client certificate; a wrong password
// over SASL_SSL is refused, and a plaintext client on a TLS port gets no
// answer while the node goes on.
func TestSecureListeners(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	_, saslSSL, ssl := secureNode(t, ca)
	ctx := testCtx(t, 60*time.Second)
	tlsCfg := &tls.Config{RootCAs: ca.Pool}
	client := ca.Client(pkix.Name{CommonName: "app", Organization: []string{"kmirror"}})

	for name, opts := range map[string][]kgo.Opt{
		"SASL_SSL PLAIN":         {kgo.SeedBrokers(saslSSL), kgo.DialTLSConfig(tlsCfg.Clone()), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism())},
		"SASL_SSL SCRAM-SHA-512": {kgo.SeedBrokers(saslSSL), kgo.DialTLSConfig(tlsCfg.Clone()), kgo.SASL(scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha512Mechanism())},
		"SSL client certificate": {kgo.SeedBrokers(ssl), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{client.TLS}})},
	} {
		topic := "secure-" + strings.NewReplacer(" ", "-", "_", "-").Replace(strings.ToLower(name))
		cl := newClient(t, saslSSL, append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
			kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err := cl.ProduceSync(ctx, kgo.StringRecord("over "+name)).FirstErr(); err != nil {
			t.Fatalf("%s: producing: %v", name, err)
		}
		got := pollN(t, ctx, cl, 1)
		if string(got[0].Value) != "over "+name {
			t.Fatalf("%s: read back %q", name, got[0].Value)
		}
	}

	wrong := newClient(t, saslSSL, kgo.SeedBrokers(saslSSL), kgo.DialTLSConfig(tlsCfg.Clone()),
		kgo.SASL(sasl.Mechanism(plain.Auth{User: "alice", Pass: "nope"}.AsMechanism())), kgo.RequestRetries(0))
	if err := wrong.Ping(ctx); err == nil {
		t.Fatal("a wrong password over SASL_SSL was accepted")
	}

	caFile := testcerts.WriteFile(t, "ca.pem", ca.PEM)
	kcatSASL := []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=carol", "-X", "sasl.password=carol-pw", "-X", "ssl.ca.location=" + caFile}
	runKcat(t, saslSSL, "k1:v1\nk2:v2\n", append(kcatSASL, "-P", "-t", "kcat-secure", "-K:")...)
	out := runKcat(t, saslSSL, "", append(kcatSASL, "-C", "-t", "kcat-secure", "-o", "beginning", "-c", "2", "-e", "-f", "%k=%s\n")...)
	if out != "k1=v1\nk2=v2\n" {
		t.Fatalf("kcat over SASL_SSL read %q", out)
	}
	certFile := testcerts.WriteFile(t, "client.pem", client.CertPEM)
	keyFile := testcerts.WriteFile(t, "client.key", client.KeyPEM)
	out = runKcat(t, ssl, "", "-X", "security.protocol=SSL", "-X", "ssl.ca.location="+caFile,
		"-X", "ssl.certificate.location="+certFile, "-X", "ssl.key.location="+keyFile,
		"-C", "-t", "kcat-secure", "-o", "beginning", "-c", "1", "-e", "-f", "%s\n")
	if out != "v1\n" {
		t.Fatalf("kcat over SSL with a client certificate read %q", out)
	}
}

// With the authorizer on, principals come from SASL and from client
// certificates: a super user administers, alice reads and writes the
// topics her prefixed ACL names, bob is refused with Kafka's codes, and an
// SSL client is allowed by its certificate's distinguished name.
func TestAuthorizationWithRealPrincipals(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	server := ca.Server()
	client := ca.Client(pkix.Name{CommonName: "app", Organization: []string{"kmirror"}})
	n := startNode(t, func(c *broker.Config) {
		c.Listeners = []broker.Listener{{Name: "SASL_SSL", Host: "127.0.0.1"}, {Name: "SSL", Host: "127.0.0.1"}}
		c.Security.TLS = &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientCAs: ca.Pool,
			ClientAuth: tls.VerifyClientCertIfGiven}
		c.Security.PlainUsers = map[string]string{"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
		c.Security.Authorizer, c.Security.SuperUsers = true, []string{"User:admin"}
	})
	var saslSSL, ssl string
	for _, l := range n.b.Listeners() {
		if l.Name == "SASL_SSL" {
			saslSSL = l.Addr()
		} else {
			ssl = l.Addr()
		}
	}
	ctx := testCtx(t, 60*time.Second)
	as := func(user string, opts ...kgo.Opt) *kgo.Client {
		return newClient(t, saslSSL, append([]kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool}),
			kgo.SASL(plain.Auth{User: user, Pass: user + "-pw"}.AsMechanism()), kgo.RequestRetries(2)}, opts...)...)
	}
	admin := kadm.NewClient(as("admin"))
	createTopic(t, ctx, admin, "app.orders", 1, nil)
	dn := "User:" + client.TLS.Leaf.Subject.String()
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Topics("app.").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").AllowHosts().
			Operations(kadm.OpRead, kadm.OpWrite),
		kadm.NewACLs().Topics("app.orders").Allow(dn).AllowHosts().Operations(kadm.OpRead),
	} {
		res, err := admin.CreateACLs(ctx, b)
		if err != nil || res[0].Err != nil {
			t.Fatalf("creating ACLs as the super user: %v %+v", err, res)
		}
	}
	if err := as("alice").ProduceSync(ctx, &kgo.Record{Topic: "app.orders", Value: []byte("by alice")}).FirstErr(); err != nil {
		t.Fatalf("alice producing to a topic her prefixed ACL allows: %v", err)
	}
	bob := as("bob", kgo.RequestRetries(0))
	if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "app.orders", Value: []byte("by bob")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob producing: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	described, err := kadm.NewClient(bob).DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny))
	if err == nil && len(described) > 0 {
		err = described[0].Err
	}
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob describing ACLs: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	tlsApp := newClient(t, ssl, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{client.TLS}}),
		kgo.ConsumeTopics("app.orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if got := pollN(t, ctx, tlsApp, 1); string(got[0].Value) != "by alice" {
		t.Fatalf("the certificate principal read %q", got[0].Value)
	}
}
