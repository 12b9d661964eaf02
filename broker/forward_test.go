package broker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/netio"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// fakeQuorum stands for a node's metadata log: controller or not, with an
// applied index, recording the index a forwarding node waits for, and
// the quorum DescribeQuorum shows (leader 1 when unset).
type fakeQuorum struct {
	controller bool
	applied    atomic.Uint64
	waited     atomic.Uint64
	state      *meta.QuorumState
}

func (q *fakeQuorum) Quorum() meta.QuorumState {
	if q.state != nil {
		return *q.state
	}
	return meta.QuorumState{LeaderID: 1}
}
func (q *fakeQuorum) IsController() bool { return q.controller }
func (q *fakeQuorum) Controller() (int32, bool) {
	id := q.Quorum().LeaderID
	return id, id >= 0
}
func (q *fakeQuorum) Applied() uint64 { return q.applied.Load() }
func (q *fakeQuorum) WaitApplied(_ context.Context, index uint64) error {
	q.waited.Store(index)
	return nil
}

// testChannel sends Envelopes to a controller broker's CONTROLLER
// listener (or fails with err when set).
type testChannel struct {
	cl  *meta.ControllerChannel
	err error
	// envelopes counts the Envelopes sent.
	envelopes atomic.Int32
}

func (c *testChannel) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.envelopes.Add(1)
	if c.err != nil {
		return nil, c.err
	}
	return c.cl.Request(ctx, req)
}

const (
	brokerPrincipal = "User:broker" // the nodes' principal, a super user of the controller
	alicePrincipal  = "User:alice"  // every client of the forwarding node
)

// forwardPair is a controller broker and a broker that forwards to it,
// both with the authorizer on. The controller sees every connection as
// brokerPrincipal (a super user), except one of deny's address, which it
// sees as User:nobody; the forwarding node sees every client as alice.
type forwardPair struct {
	ctrl, fwd *Broker
	// ctrlAddr and fwdAddr are their CONTROLLER listeners, where
	// Envelopes are served.
	ctrlAddr, fwdAddr string
	cq, fq            *fakeQuorum
	ch                *testChannel
	deny              sync.Map // remote addresses the controller sees as User:nobody
}

func newForwardPair(t *testing.T, chErr error) *forwardPair {
	t.Helper()
	p := &forwardPair{cq: &fakeQuorum{controller: true}, fq: &fakeQuorum{}}
	p.cq.applied.Store(42)
	listen := func() *meta.ControllerListener {
		ln, err := meta.ListenController("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() }) // after the brokers' Close
		return ln
	}
	ln, fln := listen(), listen()
	p.ctrlAddr, p.fwdAddr = ln.Addr().String(), fln.Addr().String()
	p.ctrl = newTestBroker(t, func(c *Config) {
		c.ControllerConns = ln.KafkaListener()
		c.MetadataQuorum = p.cq
		c.Security.Authorizer = true
		c.Security.SuperUsers = []string{brokerPrincipal}
	})
	p.ctrl.setTestPrincipal(func(addr string) string {
		if _, ok := p.deny.Load(addr); ok {
			return "User:nobody"
		}
		return brokerPrincipal
	})
	ch := meta.NewControllerChannel([]meta.Voter{{ID: 1, Addr: ln.Addr().String()}}, func() (int32, bool) { return 1, true })
	t.Cleanup(ch.Close)
	p.ch = &testChannel{cl: ch, err: chErr}
	p.fwd = newTestBroker(t, func(c *Config) {
		c.ControllerConns = fln.KafkaListener()
		c.MetadataQuorum = p.fq
		c.ControllerChannel = p.ch
		c.Security.Authorizer = true
		c.Security.SuperUsers = []string{brokerPrincipal}
	})
	p.fwd.setTestPrincipal(func(string) string { return alicePrincipal })
	return p
}

// grant gives principal ops on the controller (as a super user).
func (p *forwardPair) grant(t *testing.T, acls ...state.ACL) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		req.Creations = append(req.Creations, creationOf(a))
	}
	resp := dialRaw(t, p.ctrl).roundTrip(req).(*kmsg.CreateACLsResponse)
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("granting %v: error %d", acls, r.ErrorCode)
		}
	}
}

func createTopicsReq(names ...string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	for _, n := range names {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestForwardCreateTopics: a CreateTopics sent to the forwarding node is
// created on the controller, authorized as the client's principal (a
// denial before the grant proves that alice, not the forwarding node's
// super user, travelled), and answered after the forwarding node applied
// the controller's entry.
func TestForwardCreateTopics(t *testing.T) {
	t.Parallel()
	p := newForwardPair(t, nil)
	rc := dialRaw(t, p.fwd)

	resp := rc.roundTrip(createTopicsReq("fwd-a")).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("before the grant: %+v, want TOPIC_AUTHORIZATION_FAILED", resp.Topics)
	}
	if p.ctrl.partitions.Topic("fwd-a") != nil {
		t.Fatal("a denied topic was created")
	}

	p.grant(t, aclOf(resCluster, clusterResourceName, patLiteral, alicePrincipal, "127.0.0.1", opCreate, allow))
	p.cq.applied.Store(43)
	resp = rc.roundTrip(createTopicsReq("fwd-a")).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].TopicID == ([16]byte{}) {
		t.Fatalf("after the grant: %+v", resp.Topics)
	}
	if ct := p.ctrl.partitions.Topic("fwd-a"); ct == nil || ct.ID() != resp.Topics[0].TopicID {
		t.Fatalf("the controller holds %v, want the topic answered", ct)
	}
	if p.fwd.partitions.Topic("fwd-a") != nil {
		t.Fatal("the forwarding node created the topic itself")
	}
	if got := p.fq.waited.Load(); got != 43 {
		t.Fatalf("the forwarding node waited for entry %d, want the controller's 43", got)
	}
	// A version before the flexible ones (v5) travels as well.
	old := createTopicsReq("fwd-b")
	old.Version = 4
	resp = rc.roundTrip(old).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || p.ctrl.partitions.Topic("fwd-b") == nil {
		t.Fatalf("v4: %+v", resp.Topics)
	}
}

// TestForwardIncrementalAlterConfigs: a topic config change sent to the
// forwarding node is authorized and made on the controller.
func TestForwardIncrementalAlterConfigs(t *testing.T) {
	t.Parallel()
	p := newForwardPair(t, nil)
	if _, err := p.ctrl.partitions.Create("cfg", 1, nil, [16]byte{}, "", partition.Placement{RF: 1}); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("12345")
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)

	rc := dialRaw(t, p.fwd)
	resp := rc.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("before the grant: %+v, want TOPIC_AUTHORIZATION_FAILED", resp.Resources)
	}
	p.grant(t, aclOf(resTopic, "cfg", patLiteral, alicePrincipal, "*", opAlterConfigs, allow))
	resp = rc.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("after the grant: %+v", resp.Resources)
	}
	if v, _ := p.ctrl.partitions.Topic("cfg").Config("retention.ms"); v != "12345" {
		t.Fatalf("retention.ms on the controller is %q", v)
	}
}

// TestForwardCreateAcls: ACLs created through the forwarding node are the
// controller's, created by alice once she may ALTER the cluster.
func TestForwardCreateAcls(t *testing.T) {
	t.Parallel()
	p := newForwardPair(t, nil)
	want := aclOf(resTopic, "orders", patLiteral, "User:bob", "*", opRead, allow)
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = append(req.Creations, creationOf(want))

	rc := dialRaw(t, p.fwd)
	resp := rc.roundTrip(req).(*kmsg.CreateACLsResponse)
	if len(resp.Results) != 1 || resp.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("before the grant: %+v, want CLUSTER_AUTHORIZATION_FAILED", resp.Results)
	}
	p.grant(t, aclOf(resCluster, clusterResourceName, patLiteral, alicePrincipal, "*", opAlter, allow))
	resp = rc.roundTrip(req).(*kmsg.CreateACLsResponse)
	if len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("after the grant: %+v", resp.Results)
	}
	acls, err := p.ctrl.store.ACLs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(acls, want) {
		t.Fatalf("the controller holds %v, want %v among them", acls, want)
	}
	if local, _ := p.fwd.store.ACLs(); len(local) != 0 {
		t.Fatalf("the forwarding node holds ACLs %v", local)
	}
}

// TestForwardMirrorRPC: a mirror RPC (mirrorapi's codec, not kmsg's) sent
// to the forwarding node reaches the controller's control plane, never
// its own, once alice may ALTER the mirror and its topic's configs.
func TestForwardMirrorRPC(t *testing.T) {
	t.Parallel()
	p := newForwardPair(t, nil)
	ctrlAdmin, fwdAdmin := &fakeMirrorAdmin{mirrors: []string{"m"}}, &fakeMirrorAdmin{mirrors: []string{"m"}}
	p.ctrl.SetMirrorAdmin(ctrlAdmin)
	p.fwd.SetMirrorAdmin(fwdAdmin)
	req := mirrorapi.NewPtrPauseMirrorTopicsRequest()
	req.MirrorName = "m"
	req.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "orders"}}

	rc := dialRaw(t, p.fwd)
	resp := rc.roundTrip(req).(*mirrorapi.PauseMirrorTopicsResponse)
	if resp.ErrorCode != mirrorAuthorizationFailedCode || ctrlAdmin.count() != 0 {
		t.Fatalf("before the grant: error %d, %d calls, want CLUSTER_MIRROR_AUTHORIZATION_FAILED and none",
			resp.ErrorCode, ctrlAdmin.count())
	}
	p.grant(t, aclOf(resMirror, "m", patLiteral, alicePrincipal, "*", opAlter, allow),
		aclOf(resTopic, "orders", patLiteral, alicePrincipal, "*", opAlterConfigs, allow))
	resp = rc.roundTrip(req).(*mirrorapi.PauseMirrorTopicsResponse)
	if resp.ErrorCode != 0 || ctrlAdmin.count() != 1 || fwdAdmin.count() != 0 {
		t.Fatalf("after the grant: error %d, %d calls on the controller and %d here, want 0, 1, 0",
			resp.ErrorCode, ctrlAdmin.count(), fwdAdmin.count())
	}
}

// TestForwardChannelError: a forward that gets no answer answers every
// item with a retriable error (REQUEST_TIMED_OUT; NOT_CONTROLLER when the
// channel knows no controller), and nothing is served locally.
func TestForwardChannelError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want *kerr.Error
	}{
		{"unreachable", errors.New("dial tcp: connection refused"), kerr.RequestTimedOut},
		{"timed out", context.DeadlineExceeded, kerr.RequestTimedOut},
		{"no controller", fmt.Errorf("%w: no controller is elected", meta.ErrNotController), kerr.NotController},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newForwardPair(t, tt.err)
			rc := dialRaw(t, p.fwd)
			resp := rc.roundTrip(createTopicsReq("x", "y")).(*kmsg.CreateTopicsResponse)
			if len(resp.Topics) != 2 {
				t.Fatalf("%d topics answered, want 2", len(resp.Topics))
			}
			for _, st := range resp.Topics {
				if st.ErrorCode != tt.want.Code || !tt.want.Retriable {
					t.Errorf("topic %s: error %d, want %s", st.Topic, st.ErrorCode, tt.want.Message)
				}
			}
			if p.fwd.partitions.Topic("x") != nil || p.ctrl.partitions.Topic("x") != nil {
				t.Fatal("a topic was created")
			}
			// A request that is not forwarded is served here.
			md := kmsg.NewPtrMetadataRequest()
			md.Version = 12
			rc.roundTrip(md)
			if n := p.ch.envelopes.Load(); n != 1 {
				t.Fatalf("%d Envelopes sent, want 1", n)
			}
		})
	}
}

// envelopeOf wraps req as a forwarding node would for principal and host.
func envelopeOf(req kmsg.Request, corr int32, principal string, host string) *kmsg.EnvelopeRequest {
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = kmsg.NewRequestFormatter(kmsg.FormatterClientID("fwd-test")).AppendRequest(nil, req, corr)[4:]
	pd := principalData(principal)
	env.RequestPrincipal = pd.AppendTo(nil)
	env.ClientHostAddress = hostAddress(host)
	return env
}

// TestEnvelopeRefusals: what the Envelope handler refuses, and that a
// served Envelope answers the inner request at its version, with its
// correlation id and the applied index.
func TestEnvelopeRefusals(t *testing.T) {
	t.Parallel()
	p := newForwardPair(t, nil)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version = 6
	dt.Topics = append(dt.Topics, kmsg.DeleteTopicsRequestTopic{Topic: kmsg.StringPtr("none")})
	badPrincipal := envelopeOf(dt, 7, alicePrincipal, "127.0.0.1")
	badPrincipal.RequestPrincipal = []byte{0, 0, 5}
	badHost := envelopeOf(dt, 7, alicePrincipal, "127.0.0.1")
	badHost.ClientHostAddress = []byte{1, 2, 3}
	badVersion := envelopeOf(dt, 7, alicePrincipal, "127.0.0.1")
	badVersion.RequestData[3] = 99 // DeleteTopics v99
	truncated := envelopeOf(dt, 7, alicePrincipal, "127.0.0.1")
	truncated.RequestData = truncated.RequestData[:len(truncated.RequestData)-3]

	tests := []struct {
		name   string
		to     string // a CONTROLLER listener
		denied bool   // the controller sees the sender as User:nobody
		env    *kmsg.EnvelopeRequest
		want   *kerr.Error
	}{
		{name: "not the controller", to: p.fwdAddr, env: envelopeOf(dt, 7, alicePrincipal, "127.0.0.1"), want: kerr.NotController},
		{name: "no CLUSTER_ACTION", to: p.ctrlAddr, denied: true, env: envelopeOf(dt, 7, alicePrincipal, "127.0.0.1"),
			want: kerr.ClusterAuthorizationFailed},
		{name: "not forwardable", to: p.ctrlAddr, env: envelopeOf(md, 7, alicePrincipal, "127.0.0.1"), want: kerr.InvalidRequest},
		{name: "bad principal", to: p.ctrlAddr, env: badPrincipal, want: kerr.PrincipalDeserializationFailure},
		{name: "bad address", to: p.ctrlAddr, env: badHost, want: kerr.InvalidRequest},
		{name: "version not served", to: p.ctrlAddr, env: badVersion, want: kerr.UnsupportedVersion},
		{name: "truncated", to: p.ctrlAddr, env: truncated, want: kerr.UnsupportedVersion},
		{name: "served", to: p.ctrlAddr, env: envelopeOf(dt, 7, alicePrincipal, "::1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRawAt(t, tt.to)
			if tt.denied {
				p.deny.Store(rc.conn.LocalAddr().String(), true)
			}
			resp := rc.roundTrip(tt.env).(*kmsg.EnvelopeResponse)
			if tt.want != nil {
				if resp.ErrorCode != tt.want.Code || resp.ResponseData != nil {
					t.Fatalf("error %d with %d bytes, want %s and none", resp.ErrorCode, len(resp.ResponseData), tt.want.Message)
				}
				return
			}
			if resp.ErrorCode != 0 {
				t.Fatalf("error %d", resp.ErrorCode)
			}
			if idx, ok := appliedIndex(&resp.UnknownTags); !ok || idx != p.cq.Applied() {
				t.Fatalf("applied index %d (%v), want %d", idx, ok, p.cq.Applied())
			}
			hdr := p.ctrl.testHeader(dt, 7)
			inner, err := decodeForwardedResponse(dt, &hdr, resp.ResponseData)
			if err != nil {
				t.Fatal(err)
			}
			got := inner.(*kmsg.DeleteTopicsResponse)
			// alice may not DELETE the topic: the inner answer is hers.
			if len(got.Topics) != 1 || got.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
				t.Fatalf("inner answer %+v, want TOPIC_AUTHORIZATION_FAILED", got.Topics)
			}
		})
	}
}

// testHeader is the header Serve would parse for req sent with corr.
func (b *Broker) testHeader(req kmsg.Request, corr int32) netio.Header {
	return netio.Header{Key: req.Key(), Version: req.GetVersion(), CorrelationID: corr,
		Flexible: b.Flexible(req.Key(), req.GetVersion())}
}

// TestForwardErrorResponse: the error answer of every forwardable key has
// one item per item of the request (one per distinct user for SCRAM; the
// top-level error for the mirror RPCs), each with the error.
func TestForwardErrorResponse(t *testing.T) {
	t.Parallel()
	two := func(f func(i int)) {
		f(0)
		f(1)
	}
	reqs := map[int16]kmsg.Request{}
	ct := createTopicsReq("a", "b")
	reqs[19] = ct
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"a"}
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: [16]byte{1}}}
	reqs[20] = dt
	ca := kmsg.NewPtrCreateACLsRequest()
	two(func(int) { ca.Creations = append(ca.Creations, kmsg.NewCreateACLsRequestCreation()) })
	reqs[30] = ca
	da := kmsg.NewPtrDeleteACLsRequest()
	two(func(int) { da.Filters = append(da.Filters, kmsg.NewDeleteACLsRequestFilter()) })
	reqs[31] = da
	ac := kmsg.NewPtrAlterConfigsRequest()
	two(func(i int) {
		ac.Resources = append(ac.Resources, kmsg.AlterConfigsRequestResource{ResourceType: 2, ResourceName: fmt.Sprint(i)})
	})
	reqs[33] = ac
	cp := kmsg.NewPtrCreatePartitionsRequest()
	two(func(i int) { cp.Topics = append(cp.Topics, kmsg.CreatePartitionsRequestTopic{Topic: fmt.Sprint(i)}) })
	reqs[37] = cp
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	two(func(i int) {
		ia.Resources = append(ia.Resources, kmsg.IncrementalAlterConfigsRequestResource{ResourceType: 2, ResourceName: fmt.Sprint(i)})
	})
	reqs[44] = ia
	aq := kmsg.NewPtrAlterClientQuotasRequest()
	two(func(i int) {
		aq.Entries = append(aq.Entries, kmsg.AlterClientQuotasRequestEntry{
			Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr(fmt.Sprint(i))}}})
	})
	reqs[49] = aq
	as := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	as.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "u1"}, {Name: "u2"}}
	as.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "u1"}}
	reqs[51] = as

	for key := range int16(maxAPIKey) {
		if !isForwardable(key) {
			continue
		}
		t.Run(nameForKey(key), func(t *testing.T) {
			req, ok := reqs[key]
			if !ok {
				req = requestForKey(key) // a mirror RPC
			}
			resp := errorResponse(req, kerr.RequestTimedOut, "m")
			var codes []int16
			switch r := resp.(type) {
			case *kmsg.CreateTopicsResponse:
				for _, x := range r.Topics {
					codes = append(codes, x.ErrorCode)
				}
			case *kmsg.DeleteTopicsResponse:
				for _, x := range r.Topics {
					codes = append(codes, x.ErrorCode)
				}
			case *kmsg.CreateACLsResponse:
				for _, x := range r.Results {
					codes = append(codes, x.ErrorCode)
				}
			case *kmsg.DeleteACLsResponse:
				for _, x := range r.Results {
					codes = append(codes, x.ErrorCode)
				}
			case *kmsg.AlterConfigsResponse:
				for _, x := range r.Resources {
					codes = append(codes, x.ErrorCode)
				}
			case *kmsg.CreatePartitionsResponse:
				for _, x := range r.Topics {
					codes = append(codes, x.ErrorCode)
				}
			case *kmsg.IncrementalAlterConfigsResponse:
				for _, x := range r.Resources {
					codes = append(codes, x.ErrorCode)
				}
			case *kmsg.AlterClientQuotasResponse:
				for _, x := range r.Entries {
					if len(x.Entity) == 1 {
						codes = append(codes, x.ErrorCode)
					}
				}
			case *kmsg.AlterUserSCRAMCredentialsResponse:
				for _, x := range r.Results {
					codes = append(codes, x.ErrorCode)
				}
			default: // a mirror RPC: one top-level error
				code := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode").Int()
				codes = append(codes, int16(code), int16(code))
			}
			if len(codes) != 2 {
				t.Fatalf("%d items answered, want 2", len(codes))
			}
			for _, c := range codes {
				if c != kerr.RequestTimedOut.Code {
					t.Fatalf("code %d", c)
				}
			}
		})
	}
}
