package broker

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// newSASLBroker runs a broker with a PLAINTEXT listener (for setup) and a
// SASL_PLAINTEXT one, PLAIN users alice/bob. It returns the SASL address.
func newSASLBroker(t *testing.T) (*Broker, string) {
	t.Helper()
	b := newTestBroker(t, func(c *Config) {
		c.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1"},
			{Name: "SASL_PLAINTEXT", Host: "127.0.0.1"}}
		c.Security.PlainUsers = map[string]string{"alice": "alice-pw", "bob": "bob-pw"}
	})
	for _, l := range b.Listeners() {
		if l.Name == "SASL_PLAINTEXT" {
			return b, l.Addr()
		}
	}
	t.Fatal("no SASL listener bound")
	return nil, ""
}

// produceConsume writes and reads one record through cl.
func produceConsume(ctx context.Context, cl *kgo.Client, topic string) error {
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		return err
	}
	cl.AddConsumeTopics(topic)
	fs := cl.PollRecords(ctx, 1)
	if errs := fs.Errors(); len(errs) > 0 {
		return errs[0].Err
	}
	if fs.NumRecords() != 1 {
		return errors.New("no record read back")
	}
	return nil
}

// Clients authenticate with PLAIN and with SCRAM-SHA-256/512 (credentials
// created with AlterUserScramCredentials, as kafka-configs does) and then
// produce and consume; wrong passwords, unknown users and deleted
// credentials are refused with SASL_AUTHENTICATION_FAILED.
func TestSASLAuthentication(t *testing.T) {
	t.Parallel()
	b, saslAddr := newSASLBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newTestClient(t, b))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "sasl"); err != nil {
		t.Fatal(err)
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "carol-pw"},
		{User: "dave", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "dave-pw"},
	})
	if err != nil || res.AllFailed() {
		t.Fatalf("creating SCRAM users: %v %+v", err, res)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("creating SCRAM user %s: %v", r.User, r.Err)
		}
	}
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(described) != 2 || described["dave"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("described SCRAM users: %+v %v", described, err)
	}

	login := func(m sasl.Mechanism) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.SASL(m), kgo.RequestRetries(0),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return err
		}
		defer cl.Close()
		lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
		defer lcancel()
		// A Metadata request first: kgo's producer would retry a refused
		// login until its context ends, a request returns the error.
		if _, err := cl.Request(lctx, kmsg.NewPtrMetadataRequest()); err != nil {
			return err
		}
		return produceConsume(lctx, cl, "sasl")
	}
	for name, m := range map[string]sasl.Mechanism{
		"PLAIN":         plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism(),
		"SCRAM-SHA-256": scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha256Mechanism(),
		"SCRAM-SHA-512": scram.Auth{User: "dave", Pass: "dave-pw"}.AsSha512Mechanism(),
	} {
		if err := login(m); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, m := range map[string]sasl.Mechanism{
		"PLAIN wrong password":  plain.Auth{User: "alice", Pass: "nope"}.AsMechanism(),
		"PLAIN unknown user":    plain.Auth{User: "mallory", Pass: "alice-pw"}.AsMechanism(),
		"SCRAM wrong password":  scram.Auth{User: "carol", Pass: "nope"}.AsSha256Mechanism(),
		"SCRAM unknown user":    scram.Auth{User: "mallory", Pass: "x"}.AsSha256Mechanism(),
		"SCRAM wrong mechanism": scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha512Mechanism(),
	} {
		began := time.Now()
		err := login(m)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
		if time.Since(began) < failedAuthenticationDelay*time.Millisecond {
			t.Errorf("%s: refused in %v, before the %d ms failure delay", name, time.Since(began), failedAuthenticationDelay)
		}
	}

	if _, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := login(scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha256Mechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a deleted credential: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// The credential APIs refuse what Kafka refuses.
func TestSCRAMCredentialErrors(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newTestClient(t, b)
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(name string, mech int8, iter int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iter, []byte("salt"), []byte("salted")
		return u
	}
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{up("few", 1, 100), up("mech", 9, 4096), up("", 1, 4096),
		up("twice", 1, 4096), up("twice", 2, 4096), up("ok", 1, 4096)}
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "ghost", 1
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{"few": kerr.UnacceptableCredential.Code, "mech": kerr.UnsupportedSaslMechanism.Code,
		"": kerr.UnacceptableCredential.Code, "twice": kerr.DuplicateResource.Code, "ok": 0,
		"ghost": kerr.ResourceNotFound.Code}
	for _, r := range resp.Results {
		if r.ErrorCode != want[r.User] {
			t.Errorf("user %q: code %d, want %d", r.User, r.ErrorCode, want[r.User])
		}
		delete(want, r.User)
	}
	if len(want) != 0 {
		t.Errorf("no answer for %v", want)
	}
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	dreq.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "ok"}, {Name: "nobody"}}
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || len(dresp.Results) != 2 || dresp.Results[0].ErrorCode != 0 ||
		dresp.Results[1].ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("describe: %+v %v", dresp, err)
	}
}

// Before authenticating, a SASL listener serves only the SASL exchange:
// another request, or an oversized one, closes the connection; other
// connections go on.
func TestSASLGate(t *testing.T) {
	t.Parallel()
	b, saslAddr := newSASLBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for name, req := range map[string]kmsg.Request{
		"metadata before authentication": kmsg.NewPtrMetadataRequest(),
		"oversized handshake": func() kmsg.Request {
			r := kmsg.NewPtrSASLHandshakeRequest()
			r.Mechanism = strings.Repeat("x", saslMaxReceiveSize+1)
			return r
		}(),
	} {
		conn, err := net.Dial("tcp", saslAddr)
		if err != nil {
			t.Fatal(err)
		}
		req.SetVersion(1)
		if r, ok := req.(*kmsg.MetadataRequest); ok {
			r.Version = 4
		}
		fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("gate-test"))
		if _, err := conn.Write(fmtr.AppendRequest(nil, req, 1)); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Errorf("%s: the connection answered, want it closed", name)
		}
		conn.Close()
	}
	// The PLAINTEXT listener and fresh SASL connections still work.
	if err := produceConsume(ctx, newTestClient(t, b, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AllowAutoTopicCreation()), "after-gate"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.SASL(plain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("a SASL client after the bad connections: %v", err)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "GSSAPI"
	hresp, err := hs.RequestWith(ctx, newTestClient(t, b))
	if err != nil || hresp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("a handshake on the PLAINTEXT listener: %+v %v, want ILLEGAL_SASL_STATE", hresp, err)
	}
}
