package main

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testcerts"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// kmirror mirrors reaches a SASL_SSL-only node with --command-config, as
// kafka-cluster-mirrors.sh does: security.protocol, sasl.mechanism,
// sasl.jaas.config and a PEM trust store. A wrong password fails with one
// line.
func TestMirrorsCommandConfigSASLSSL(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	cfg := nodetest.Config(t)
	cfg.Listeners = []broker.Listener{{Name: "SASL_SSL", Host: "127.0.0.1"}}
	cfg.Security.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server().TLS}}
	cfg.Security.PlainUsers = map[string]string{"ops": "ops-pw"}
	b := startTestNode(t, cfg)
	trust := testcerts.WriteFile(t, "ca.pem", ca.PEM)
	props := func(pass string) string {
		return writeTestFile(t, "client.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"+
			`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="ops" password="`+pass+`";`+"\n"+
			"ssl.truststore.location="+trust+"\n")
	}
	code, out, errOut := mirrorsCmd("--list", "--bootstrap-server", b.Addr(), "--command-config", props("ops-pw"))
	if code != 0 || !strings.Contains(out, "MIRROR") {
		t.Fatalf("--list over SASL_SSL: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	failMirrors(t, 1, []string{"SASL"}, "--list", "--bootstrap-server", b.Addr(), "--timeout", "5s",
		"--command-config", props("wrong"))
}
