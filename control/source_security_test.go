package control

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/internal/clientauth"
	"github.com/kmirror/kmirror/internal/testcerts"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// A mirror reaches a secured source with its own settings: data is
// mirrored and group offsets synced over SASL (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512) and TLS, and the mirror's credentials are never
// described back.
func TestSecuredSource(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	server := ca.Server()
	for _, tc := range []struct {
		protocol, mechanism, module string
		tls                         bool
	}{
		{"SASL_PLAINTEXT", "PLAIN", "plain.PlainLoginModule", false},
		{"SASL_SSL", "SCRAM-SHA-256", "scram.ScramLoginModule", true},
		{"SASL_PLAINTEXT", "SCRAM-SHA-512", "scram.ScramLoginModule", false},
		{"SSL", "", "", true},
	} {
		t.Run(tc.protocol+"-"+tc.mechanism, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(2, "secret-orders")}
			var clientOpts []kgo.Opt
			configs := map[string]string{"security.protocol": tc.protocol}
			if tc.mechanism != "" {
				opts = append(opts, kfake.EnableSASL(), kfake.Superuser(tc.mechanism, "mirror", "s3cr=t;\"pw"))
				configs["sasl.mechanism"] = tc.mechanism
				configs["sasl.jaas.config"] = "org.apache.kafka.common.security." + tc.module +
					` required username="mirror" password="s3cr=t;\"pw";`
				switch tc.mechanism {
				case "PLAIN":
					clientOpts = append(clientOpts, kgo.SASL(plain.Auth{User: "mirror", Pass: "s3cr=t;\"pw"}.AsMechanism()))
				case "SCRAM-SHA-256":
					clientOpts = append(clientOpts, kgo.SASL(scram.Auth{User: "mirror", Pass: "s3cr=t;\"pw"}.AsSha256Mechanism()))
				default:
					clientOpts = append(clientOpts, kgo.SASL(scram.Auth{User: "mirror", Pass: "s3cr=t;\"pw"}.AsSha512Mechanism()))
				}
			}
			if tc.tls {
				opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server.TLS}}))
				configs["ssl.truststore.type"] = "PEM"
				configs["ssl.truststore.certificates"] = string(ca.PEM)
				clientOpts = append(clientOpts, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool}))
			}
			src := kfaketest.Source(t, opts...)
			scl, err := kgo.NewClient(append(clientOpts, kgo.SeedBrokers(src.ListenAddrs()...),
				kgo.DefaultProduceTopic("secret-orders"))...)
			if err != nil {
				t.Fatal(err)
			}
			defer scl.Close()
			for i := range 10 {
				if err := scl.ProduceSync(ctx, kgo.StringRecord(strings.Repeat("x", i))).FirstErr(); err != nil {
					t.Fatalf("producing to the secured source: %v", err)
				}
			}
			ends, err := kadm.NewClient(scl).ListEndOffsets(ctx, "secret-orders")
			if err != nil {
				t.Fatal(err)
			}

			cfg := nodetest.Config(t)
			cfg.PasswordEncoderSecret = "test-encoder-secret"
			n := openTestNode(t, cfg, nil)
			defer n.close()
			configs["bootstrap.servers"] = src.ListenAddrs()[0]
			createMirrorWith(t, ctx, n, configs, 0)
			n.startTopics(t, ctx, "secret-orders")
			ends.Each(func(o kadm.ListedOffset) {
				testutil.CheckFor(t, testutil.Timeout, testutil.True("the committed offset mirrored", func() bool {
					local, err := n.b.Partitions().MirrorPartition("secret-orders", o.Partition)
					return err == nil && local.HighWatermark() == o.Offset
				}))
			})
			n.ctl.SyncOnce()
			for _, st := range n.ctl.SyncStats() {
				for kind, errs := range st.Errors {
					if errs != 0 {
						t.Fatalf("sync over %s: %d %s errors", tc.protocol, errs, kind)
					}
				}
			}

			// Secrets are never described back.
			dreq := kmsg.NewPtrDescribeConfigsRequest()
			dreq.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceType(64), ResourceName: "m"}}
			dresp, err := dreq.RequestWith(ctx, n.cl)
			if err != nil || len(dresp.Resources) != 1 || dresp.Resources[0].ErrorCode != 0 {
				t.Fatalf("describing the mirror's configs: %v %+v", err, dresp)
			}
			described := 0
			for _, c := range dresp.Resources[0].Configs {
				if clientauth.Sensitive(c.Name) {
					described++
					if c.Value != nil || !c.IsSensitive {
						t.Fatalf("%s described with value %v, sensitive %v", c.Name, c.Value, c.IsSensitive)
					}
				}
			}
			if tc.mechanism != "" && described != 1 {
				t.Fatalf("sasl.jaas.config not described at all")
			}
		})
	}
}

// A wrong password or an untrusted certificate refuses the mirror at
// create with an error that says why and never quotes the secret.
func TestSecuredSourceRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ca, other := testcerts.NewCA(t), testcerts.NewCA(t)
	src := kfaketest.Source(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "mirror", "right"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{ca.Server().TLS}}))
	cfg := nodetest.Config(t)
	cfg.PasswordEncoderSecret = "test-encoder-secret"
	n := openTestNodeWith(t, cfg, nil, Config{SourceTimeout: 5 * time.Second})
	defer n.close()
	base := func(pass, trust string) map[string]string {
		return map[string]string{"bootstrap.servers": src.ListenAddrs()[0], "security.protocol": "SASL_SSL",
			"sasl.mechanism": "SCRAM-SHA-256", "ssl.truststore.certificates": trust,
			"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="` + pass + `";`}
	}
	for _, tc := range []struct {
		name    string
		configs map[string]string
		want    string
	}{
		{"wrong password", base("wr0ng-pass", string(ca.PEM)), "SASL"},
		{"untrusted certificate", base("right", string(other.PEM)), "certificate"},
		{"bad jaas", map[string]string{"bootstrap.servers": src.ListenAddrs()[0], "security.protocol": "SASL_SSL",
			"sasl.jaas.config": `PlainLoginModule required username="mirror" password="wr0ng-pass"`}, "sasl.jaas.config"},
	} {
		msg := createMirrorWith(t, ctx, n, tc.configs, 1)
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, "wr0ng-pass") {
			t.Errorf("%s: create answered %q, want it to mention %q and never the password", tc.name, msg, tc.want)
		}
	}
}

// createMirrorWith creates mirror "m" with configs. wantFail 0: it must
// succeed; else it must fail, and its error message is returned.
func createMirrorWith(t *testing.T, ctx context.Context, n *testNode, configs map[string]string, wantFail int) string {
	t.Helper()
	req := mirrorapi.NewPtrCreateClusterMirrorRequest()
	req.MirrorName = "m"
	for k, v := range configs {
		req.Configs = append(req.Configs, mirrorapi.CreateClusterMirrorRequestConfig{Name: k, Value: &v})
	}
	resp, err := n.cl.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.(*mirrorapi.CreateClusterMirrorResponse)
	msg := ""
	if c.ErrorMessage != nil {
		msg = *c.ErrorMessage
	}
	if (c.ErrorCode != 0) != (wantFail != 0) {
		t.Fatalf("create: code %d %q", c.ErrorCode, msg)
	}
	return msg
}

// Without password.encoder.secret a mirror holding a credential is refused
// at create, saying what to set: it would otherwise be stored in the clear.
func TestCredentialsNeedEncoderSecret(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "mirror", "pw"))
	n := openTestNode(t, nodetest.Config(t), nil)
	defer n.close()
	msg := createMirrorWith(t, ctx, n, map[string]string{"bootstrap.servers": src.ListenAddrs()[0],
		"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
		"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="mirror" password="pw";`}, 1)
	if !strings.Contains(msg, "password.encoder.secret") {
		t.Fatalf("create answered %q, want it to name password.encoder.secret", msg)
	}
}
