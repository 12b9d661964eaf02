package broker

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/netio"
	"github.com/kmirror/kmirror/state"
)

// setTestPrincipal installs the authorizer's test seam: f names the
// principal of each request from the client's address.
func (b *Broker) setTestPrincipal(f func(remoteAddr string) string) {
	b.authorizer().testPrincipal.Store(&f)
}

// Short names for the operations the decision tests use (acls_test.go has
// READ, WRITE, ALTER and DESCRIBE).
const (
	opAll             = kmsg.ACLOperationAll
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
	resTxnID          = kmsg.ACLResourceTypeTransactionalId
)

// decideWith runs the whole decision (authzCtx.check) for one action.
func decideWith(acls []state.ACL, sec Security, principal, host string, op kmsg.ACLOperation,
	typ kmsg.ACLResourceType, name string) bool {
	a := newAuthorizer(sec)
	c := authzCtx{a: a, principal: principal, host: host, super: a.superUsers[principal]}
	if !c.super {
		c.idx = newACLIndex(acls, 0)
	}
	return c.check(int8(op), int8(typ), name, false)
}

func TestAuthorizeDecision(t *testing.T) {
	t.Parallel()
	const alice, bob, carol = "User:alice", "User:bob", "User:carol"
	topicACL := func(name string, pat kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation,
		perm kmsg.ACLPermissionType) state.ACL {
		return aclOf(resTopic, name, pat, principal, host, op, perm)
	}
	// Thirty principals on one topic: past aclEntriesSplitAt, so the
	// bindings are also split by principal.
	var crowd []state.ACL
	for i := range 30 {
		crowd = append(crowd, topicACL("crowded", patLiteral, fmt.Sprintf("User:u%d", i), "*", opRead, allow))
	}
	crowd = append(crowd, topicACL("crowded", patLiteral, "User:*", "*", opDescribe, allow),
		topicACL("crowded", patLiteral, "User:u7", "*", opRead, deny))

	tests := []struct {
		name      string
		acls      []state.ACL
		sec       Security
		principal string
		host      string
		op        kmsg.ACLOperation
		typ       kmsg.ACLResourceType
		resource  string
		want      bool
	}{
		{name: "super user without ACLs", sec: Security{SuperUsers: []string{"User:admin"}},
			principal: "User:admin", op: opAlter, typ: resCluster, resource: clusterResourceName, want: true},
		{name: "super user despite a DENY", sec: Security{SuperUsers: []string{" User:admin "}},
			acls:      []state.ACL{topicACL("t", patLiteral, "User:admin", "*", opAll, deny)},
			principal: "User:admin", op: opRead, typ: resTopic, resource: "t", want: true},
		{name: "super user match is exact", sec: Security{SuperUsers: []string{"User:admin"}},
			principal: "User:Admin", op: opRead, typ: resTopic, resource: "t", want: false},

		{name: "no ACL: denied by default", principal: alice, op: opRead, typ: resTopic, resource: "t", want: false},
		{name: "no ACL: allow.everyone.if.no.acl.found", sec: Security{AllowEveryoneIfNoACL: true},
			principal: alice, op: opRead, typ: resTopic, resource: "t", want: true},
		{name: "ACLs of others on the resource: denied even with allow.everyone",
			sec:       Security{AllowEveryoneIfNoACL: true},
			acls:      []state.ACL{topicACL("t", patLiteral, bob, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "t", want: false},
		{name: "ACLs of another resource type do not count", sec: Security{AllowEveryoneIfNoACL: true},
			acls:      []state.ACL{aclOf(resGroup, "t", patLiteral, bob, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "t", want: true},

		{name: "literal allow", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "t", want: true},
		{name: "literal allow of another operation", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opWrite, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "t", want: false},
		{name: "literal allow of another name", acls: []state.ACL{topicACL("t2", patLiteral, alice, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "t", want: false},
		{name: "ALL allows any operation", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opAll, allow)},
			principal: alice, op: opAlterConfigs, typ: resTopic, resource: "t", want: true},

		{name: "deny wins over allow", acls: []state.ACL{
			topicACL("t", patLiteral, alice, "*", opRead, allow),
			topicACL("t", patLiteral, alice, "*", opRead, deny)},
			principal: alice, op: opRead, typ: resTopic, resource: "t", want: false},
		{name: "prefixed deny wins over literal allow", acls: []state.ACL{
			topicACL("orders", patLiteral, alice, "*", opRead, allow),
			topicACL("ord", patPrefix, alice, "*", opRead, deny)},
			principal: alice, op: opRead, typ: resTopic, resource: "orders", want: false},
		{name: "wildcard deny wins over literal allow", acls: []state.ACL{
			topicACL("orders", patLiteral, alice, "*", opRead, allow),
			topicACL("*", patLiteral, alice, "*", opRead, deny)},
			principal: alice, op: opRead, typ: resTopic, resource: "orders", want: false},
		{name: "deny for User:* wins", acls: []state.ACL{
			topicACL("t", patLiteral, alice, "*", opRead, allow),
			topicACL("t", patLiteral, "User:*", "*", opRead, deny)},
			principal: alice, op: opRead, typ: resTopic, resource: "t", want: false},
		{name: "DENY ALL denies every operation", acls: []state.ACL{
			topicACL("t", patLiteral, alice, "*", opDescribe, allow),
			topicACL("t", patLiteral, alice, "*", opAll, deny)},
			principal: alice, op: opDescribe, typ: resTopic, resource: "t", want: false},
		{name: "deny of another principal does not apply", acls: []state.ACL{
			topicACL("t", patLiteral, alice, "*", opRead, allow),
			topicACL("t", patLiteral, bob, "*", opRead, deny)},
			principal: alice, op: opRead, typ: resTopic, resource: "t", want: true},
		{name: "deny from another host does not apply", acls: []state.ACL{
			topicACL("t", patLiteral, alice, "*", opRead, allow),
			topicACL("t", patLiteral, alice, "10.0.0.9", opRead, deny)},
			principal: alice, host: "10.0.0.1", op: opRead, typ: resTopic, resource: "t", want: true},

		{name: "prefixed allow", acls: []state.ACL{topicACL("ord", patPrefix, alice, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "orders", want: true},
		{name: "prefixed allow of the whole name", acls: []state.ACL{topicACL("orders", patPrefix, alice, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "orders", want: true},
		{name: "prefixed longer than the name", acls: []state.ACL{topicACL("orders", patPrefix, alice, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "ord", want: false},
		{name: "prefixed is not a substring match", acls: []state.ACL{topicACL("ders", patPrefix, alice, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "orders", want: false},
		{name: "prefixed of several lengths", acls: []state.ACL{
			topicACL("o", patPrefix, bob, "*", opRead, allow),
			topicACL("orde", patPrefix, alice, "*", opRead, allow),
			topicACL("orders-eu-west", patPrefix, alice, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "orders-eu", want: true},
		{name: "prefixed \"*\" is a plain prefix, not a wildcard",
			acls:      []state.ACL{topicACL("*", patPrefix, alice, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "orders", want: false},

		{name: "wildcard name", acls: []state.ACL{topicACL("*", patLiteral, alice, "*", opRead, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "anything", want: true},
		{name: "wildcard principal", acls: []state.ACL{topicACL("t", patLiteral, "User:*", "*", opRead, allow)},
			principal: carol, op: opRead, typ: resTopic, resource: "t", want: true},
		{name: "wildcard host", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opRead, allow)},
			principal: alice, host: "192.168.1.1", op: opRead, typ: resTopic, resource: "t", want: true},
		{name: "exact host", acls: []state.ACL{topicACL("t", patLiteral, alice, "10.0.0.1", opRead, allow)},
			principal: alice, host: "10.0.0.1", op: opRead, typ: resTopic, resource: "t", want: true},
		{name: "other host", acls: []state.ACL{topicACL("t", patLiteral, alice, "10.0.0.1", opRead, allow)},
			principal: alice, host: "10.0.0.2", op: opRead, typ: resTopic, resource: "t", want: false},
		{name: "IPv6 host written out in full", acls: []state.ACL{topicACL("t", patLiteral, alice, "0:0:0:0:0:0:0:1", opRead, allow)},
			principal: alice, host: "::1", op: opRead, typ: resTopic, resource: "t", want: true},
		{name: "principal match is exact", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opRead, allow)},
			principal: "User:Alice", op: opRead, typ: resTopic, resource: "t", want: false},

		{name: "READ implies DESCRIBE", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opRead, allow)},
			principal: alice, op: opDescribe, typ: resTopic, resource: "t", want: true},
		{name: "WRITE implies DESCRIBE", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opWrite, allow)},
			principal: alice, op: opDescribe, typ: resTopic, resource: "t", want: true},
		{name: "DELETE implies DESCRIBE", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opDelete, allow)},
			principal: alice, op: opDescribe, typ: resTopic, resource: "t", want: true},
		{name: "ALTER implies DESCRIBE", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opAlter, allow)},
			principal: alice, op: opDescribe, typ: resTopic, resource: "t", want: true},
		{name: "CREATE does not imply DESCRIBE", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opCreate, allow)},
			principal: alice, op: opDescribe, typ: resTopic, resource: "t", want: false},
		{name: "ALTER_CONFIGS implies DESCRIBE_CONFIGS",
			acls:      []state.ACL{topicACL("t", patLiteral, alice, "*", opAlterConfigs, allow)},
			principal: alice, op: opDescribeConfigs, typ: resTopic, resource: "t", want: true},
		{name: "DESCRIBE does not imply READ", acls: []state.ACL{topicACL("t", patLiteral, alice, "*", opDescribe, allow)},
			principal: alice, op: opRead, typ: resTopic, resource: "t", want: false},
		{name: "DESCRIBE_CONFIGS does not imply ALTER_CONFIGS",
			acls:      []state.ACL{topicACL("t", patLiteral, alice, "*", opDescribeConfigs, allow)},
			principal: alice, op: opAlterConfigs, typ: resTopic, resource: "t", want: false},
		{name: "a DENY of READ does not deny DESCRIBE", acls: []state.ACL{
			topicACL("t", patLiteral, alice, "*", opDescribe, allow),
			topicACL("t", patLiteral, alice, "*", opRead, deny)},
			principal: alice, op: opDescribe, typ: resTopic, resource: "t", want: true},
		{name: "a DENY of READ does not imply a DENY of DESCRIBE for READ's ALLOW", acls: []state.ACL{
			topicACL("t", patLiteral, alice, "*", opWrite, allow),
			topicACL("t", patLiteral, alice, "*", opRead, deny)},
			principal: alice, op: opDescribe, typ: resTopic, resource: "t", want: true},

		{name: "cluster", acls: []state.ACL{aclOf(resCluster, clusterResourceName, patLiteral, alice, "*", opClusterAction, allow)},
			principal: alice, op: opClusterAction, typ: resCluster, resource: clusterResourceName, want: true},
		{name: "cluster mirror", acls: []state.ACL{aclOf(resMirror, "east", patPrefix, alice, "*", opAlter, allow)},
			principal: alice, op: opAlter, typ: resMirror, resource: "east-1", want: true},

		{name: "many principals: one of them", acls: crowd, principal: "User:u12", op: opRead, typ: resTopic,
			resource: "crowded", want: true},
		{name: "many principals: a denied one", acls: crowd, principal: "User:u7", op: opRead, typ: resTopic,
			resource: "crowded", want: false},
		{name: "many principals: User:* for another", acls: crowd, principal: carol, op: opDescribe, typ: resTopic,
			resource: "crowded", want: true},
		{name: "many principals: none for another", acls: crowd, principal: carol, op: opRead, typ: resTopic,
			resource: "crowded", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			host := tc.host
			if host == "" {
				host = "127.0.0.1"
			}
			if got := decideWith(tc.acls, tc.sec, tc.principal, host, tc.op, tc.typ, tc.resource); got != tc.want {
				t.Fatalf("%s %s on %s %q: got allowed=%v, want %v", tc.principal, tc.op, tc.typ, tc.resource, got, tc.want)
			}
		})
	}
}

// TestAuthorizeByResourceType checks Kafka's authorizeByResourceType, which
// InitProducerId asks (WRITE on any topic).
func TestAuthorizeByResourceType(t *testing.T) {
	t.Parallel()
	const alice = "User:alice"
	tests := []struct {
		name string
		acls []state.ACL
		sec  Security
		want bool
	}{
		{name: "no ACL", want: false},
		{name: "no ACL, allow.everyone", sec: Security{AllowEveryoneIfNoACL: true}, want: true},
		{name: "literal allow", acls: []state.ACL{aclOf(resTopic, "t", patLiteral, alice, "*", opWrite, allow)}, want: true},
		{name: "prefixed allow", acls: []state.ACL{aclOf(resTopic, "t", patPrefix, alice, "*", opWrite, allow)}, want: true},
		{name: "ALL allow", acls: []state.ACL{aclOf(resTopic, "t", patLiteral, "User:*", "*", opAll, allow)}, want: true},
		{name: "another operation", acls: []state.ACL{aclOf(resTopic, "t", patLiteral, alice, "*", opRead, allow)}, want: false},
		{name: "another host", acls: []state.ACL{aclOf(resTopic, "t", patLiteral, alice, "10.1.1.1", opWrite, allow)}, want: false},
		{name: "literal allow, literal deny", acls: []state.ACL{
			aclOf(resTopic, "t", patLiteral, alice, "*", opWrite, allow),
			aclOf(resTopic, "t", patLiteral, alice, "*", opWrite, deny)}, want: false},
		{name: "prefixed allow under a prefixed deny", acls: []state.ACL{
			aclOf(resTopic, "abc", patPrefix, alice, "*", opWrite, allow),
			aclOf(resTopic, "ab", patPrefix, alice, "*", opWrite, deny)}, want: false},
		{name: "prefixed allow beside a literal deny", acls: []state.ACL{
			aclOf(resTopic, "abc", patPrefix, alice, "*", opWrite, allow),
			aclOf(resTopic, "abc", patLiteral, alice, "*", opWrite, deny)}, want: true},
		{name: "wildcard deny", acls: []state.ACL{
			aclOf(resTopic, "abc", patLiteral, alice, "*", opWrite, allow),
			aclOf(resTopic, "*", patLiteral, alice, "*", opWrite, deny)}, want: false},
		{name: "wildcard allow", acls: []state.ACL{aclOf(resTopic, "*", patLiteral, alice, "*", opWrite, allow)}, want: true},
		{name: "super user", sec: Security{SuperUsers: []string{alice}}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAuthorizer(tc.sec)
			c := authzCtx{a: a, principal: alice, host: "127.0.0.1", super: a.superUsers[alice],
				idx: newACLIndex(tc.acls, 0)}
			if got := c.anyResource(aclOperationWrite, aclResourceTopic); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAuthorizeNoAllocs: a check allocates nothing, whatever it decides.
func TestAuthorizeNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	acls := benchACLs(1000)
	a := newAuthorizer(Security{})
	c := authzCtx{a: a, principal: "User:u3", host: "10.0.0.3", idx: newACLIndex(acls, 0)}
	names := []string{"topic-3", "pfx-3-orders", "nothing-here", "topic-4"}
	allocs := testing.AllocsPerRun(200, func() {
		for _, n := range names {
			c.check(aclOperationRead, aclResourceTopic, n, false)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per check round, want 0", allocs)
	}
}

// TestAuthorizeFetchNoAllocs: the authorization of a Fetch, context and
// per-partition decisions, allocates nothing once the connection is warm.
// Not parallel: AllocsPerRun counts the whole process.
func TestAuthorizeFetchNoAllocs(t *testing.T) {
	b := newAuthzBroker(t)
	mine, other := mustTopic(t, b, "alice.t", 8), mustTopic(t, b, "other", 2)
	if err := b.CreateACLs([]state.ACL{aclOf(resTopic, "alice.", patPrefix, "User:alice", "*", opRead, allow)}); err != nil {
		t.Fatal(err)
	}
	b.setTestPrincipal(func(string) string { return "User:alice" })
	req := fullFetchReq(12, mine, 1<<20)
	for i := range other.Partitions() {
		addPart(req, other, int32(i), 0)
	}
	r := &request{conn: &netio.Conn{}, hdr: &netio.Header{Key: 1, Version: 12}}
	var fs fetchScratch
	run := func() {
		fs.parts, fs.topics = fs.parts[:0], fs.topics[:0]
		if _, err := b.fetchSessionFor(req, &fs); err != nil {
			t.Fatal(err)
		}
		b.authorizeFetch(r, req, &fs)
	}
	run()
	for _, fp := range fs.parts {
		if fp.denied != (fp.t == other) {
			t.Fatalf("%s-%d: denied %v", fp.t.Name(), fp.partition, fp.denied)
		}
	}
	// The test's connection has no remote address, so r.host() allocates
	// the error of splitting ""; a real connection's host:port splits
	// without one. Count that apart.
	split := testing.AllocsPerRun(200, func() { _ = r.host() })
	if n := testing.AllocsPerRun(200, func() { _, _, _ = net.SplitHostPort("127.0.0.1:9092") }); n != 0 && !raceEnabled {
		t.Fatalf("splitting a real address allocates %.1f times", n)
	}
	allocs := testing.AllocsPerRun(200, run)
	if allocs-split != 0 && !raceEnabled {
		t.Fatalf("%.1f allocations per Fetch authorization (%.1f splitting an empty address), want 0", allocs, split)
	}
}

// benchACLs returns n bindings shaped like a busy cluster's: per topic, a
// READ and a WRITE of a user; per prefix, a READ of a user and a DENY of
// another; some wildcard-principal DESCRIBEs; and group bindings.
func benchACLs(n int) []state.ACL {
	acls := make([]state.ACL, 0, n)
	for i := 0; len(acls) < n; i++ {
		u := fmt.Sprintf("User:u%d", i%100)
		switch i % 5 {
		case 0, 1:
			acls = append(acls, aclOf(resTopic, fmt.Sprintf("topic-%d", i), patLiteral, u, "*", opRead, allow),
				aclOf(resTopic, fmt.Sprintf("topic-%d", i), patLiteral, u, "10.0.0.1", opWrite, allow))
		case 2:
			acls = append(acls, aclOf(resTopic, fmt.Sprintf("pfx-%d-", i%300), patPrefix, u, "*", opRead, allow),
				aclOf(resTopic, fmt.Sprintf("pfx-%d-secret", i%300), patPrefix, "User:u0", "*", opAll, deny))
		case 3:
			acls = append(acls, aclOf(resTopic, fmt.Sprintf("shared-%d", i), patLiteral, "User:*", "*", opDescribe, allow))
		case 4:
			acls = append(acls, aclOf(resGroup, fmt.Sprintf("group-%d", i), patLiteral, u, "*", opRead, allow))
		}
	}
	return acls[:n]
}

// BenchmarkAuthorize measures one decision against 10,000 bindings.
func BenchmarkAuthorize(b *testing.B) {
	acls := benchACLs(10000)
	idx := newACLIndex(acls, 0)
	cases := []struct {
		name      string
		principal string
		op        int8
		topic     string
		want      bool
	}{
		{"case=literal-allow", "User:u5", aclOperationRead, "topic-5", true},
		{"case=prefixed-allow", "User:u7", aclOperationRead, "pfx-7-orders", true},
		{"case=prefixed-deny", "User:u0", aclOperationRead, "pfx-0-secret-x", false},
		{"case=implied-describe", "User:u42", aclOperationDescribe, "shared-8", true},
		{"case=no-acl", "User:u5", aclOperationRead, "unknown-topic-name", false},
		{"case=no-match", "User:u6", aclOperationWrite, "topic-5", false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			a := newAuthorizer(Security{})
			c := authzCtx{a: a, principal: tc.principal, host: "10.0.0.2", idx: idx}
			if got := c.check(tc.op, aclResourceTopic, tc.topic, false); got != tc.want {
				b.Fatalf("got %v, want %v", got, tc.want)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c.check(tc.op, aclResourceTopic, tc.topic, false)
			}
		})
	}
	b.Run("case=index-build", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			newACLIndex(acls, 0)
		}
	})
}

// logBuffer collects a broker's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), substr)
}

// TestAuthorizeDenialLog: a denial is logged once per principal,
// operation and resource, not per request, and the set is bounded.
func TestAuthorizeDenialLog(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	b := newAuthzBroker(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	mustTopic(t, b, "secret", 1)
	mustTopic(t, b, "secret2", 1)
	rc := rawAs(t, b, bobIP)
	for range 5 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "secret"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = 0, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rc.roundTrip(req).(*kmsg.ListOffsetsResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("error %d, want TOPIC_AUTHORIZATION_FAILED", code)
		}
	}
	if n := logs.count(`resource_name=secret `); n != 1 {
		t.Fatalf("%d denial lines for the same denial, want 1:\n%s", n, logs.buf.String())
	}
	if !strings.Contains(logs.buf.String(), "principal=User:bob") || !strings.Contains(logs.buf.String(), "operation=DESCRIBE") ||
		!strings.Contains(logs.buf.String(), "api=ListOffsets") {
		t.Fatalf("the denial line lacks principal, operation or api:\n%s", logs.buf.String())
	}

	// A listing filtered by the authorizer logs nothing.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	rc.roundTrip(md)
	if n := logs.count(`resource_name=secret2`); n != 0 {
		t.Fatalf("a filtered listing logged %d denials", n)
	}

	// The set of logged denials stays bounded.
	a := b.authorizer()
	for i := range maxLoggedDenials + 10 {
		a.logDenial(b, nil, "User:x", "h", aclOperationRead, aclResourceTopic, fmt.Sprint(i))
	}
	a.deniedMu.Lock()
	n := len(a.denied)
	a.deniedMu.Unlock()
	if n > maxLoggedDenials {
		t.Fatalf("%d denials remembered, bound %d", n, maxLoggedDenials)
	}
}

// TestAuthorizeCacheFollowsChanges: the in-memory index follows every way
// ACLs change (CreateAcls, DeleteAcls, the Go API), and is not re-read
// from the store when nothing changed.
func TestAuthorizeCacheFollowsChanges(t *testing.T) {
	t.Parallel()
	b := newAuthzBroker(t)
	mustTopic(t, b, "t", 1)
	bob := rawAs(t, b, bobIP)
	admin := rawAs(t, b, adminIP)
	listOffsets := func() int16 {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return bob.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
	}
	bobRead := aclOf(resTopic, "t", patLiteral, "User:bob", "*", opRead, allow)

	if code := listOffsets(); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("before any ACL: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	idx := b.authorizer().idx.Load()
	if code := listOffsets(); code != kerr.TopicAuthorizationFailed.Code || b.authorizer().idx.Load() != idx {
		t.Fatalf("the index was rebuilt without a change (error %d)", code)
	}

	// CreateAcls request.
	creq := kmsg.NewPtrCreateACLsRequest()
	creq.Version = 3
	creq.Creations = append(creq.Creations, creationOf(bobRead))
	if cr := admin.roundTrip(creq).(*kmsg.CreateACLsResponse); cr.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls: error %d", cr.Results[0].ErrorCode)
	}
	if code := listOffsets(); code != 0 {
		t.Fatalf("after CreateAcls: error %d, want none", code)
	}

	// DeleteAcls request.
	dreq := kmsg.NewPtrDeleteACLsRequest()
	dreq.Version = 3
	dreq.Filters = append(dreq.Filters, aclFilterSpec{typ: resTopic, pat: patAny, op: opAny, perm: permAny}.deletion())
	if dr := admin.roundTrip(dreq).(*kmsg.DeleteACLsResponse); dr.Results[0].ErrorCode != 0 || len(dr.Results[0].MatchingACLs) != 1 {
		t.Fatalf("DeleteAcls: %+v", dr.Results)
	}
	if code := listOffsets(); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("after DeleteAcls: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}

	// The Go API the mirror's ACL sync uses.
	if err := b.CreateACLs([]state.ACL{bobRead}); err != nil {
		t.Fatal(err)
	}
	if code := listOffsets(); code != 0 {
		t.Fatalf("after CreateACLs: error %d, want none", code)
	}
	if err := b.DeleteACLs([]state.ACL{bobRead}); err != nil {
		t.Fatal(err)
	}
	if code := listOffsets(); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("after DeleteACLs: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
}

// TestAuthorizeOffByDefault: without Security.Authorizer the ACLs are
// stored but nothing is checked.
func TestAuthorizeOffByDefault(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	mustTopic(t, b, "t", 1)
	if err := b.CreateACLs([]state.ACL{aclOf(resTopic, "t", patLiteral, "User:ANONYMOUS", "*", opAll, deny)}); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, b)
	resp := rc.roundTrip(produceReq(9, -1, b.partitions.Topic("t"), 0, plainBatch(1, 10))).(*kmsg.ProduceResponse)
	if sp := onlyPartition(t, resp); sp.ErrorCode != 0 {
		t.Fatalf("produce: error %d, want none with the authorizer off", sp.ErrorCode)
	}
}

// Test principals: the authorizer's test seam names them by the client's
// loopback address (Linux routes all of 127.0.0.0/8 to lo).
const (
	aliceIP = "127.0.0.2"
	bobIP   = "127.0.0.3"
	adminIP = "127.0.0.4" // a super user
	opsIP   = "127.0.0.5" // ALLOW ALL on the cluster
)

// newAuthzBroker starts a broker with the authorizer on, User:admin a
// super user, and the test seam naming principals by client address.
func newAuthzBroker(t testing.TB, mutate ...func(*Config)) *Broker {
	t.Helper()
	b := newTestBroker(t, append([]func(*Config){func(c *Config) {
		c.Security.Authorizer = true
		c.Security.SuperUsers = []string{"User:admin"}
	}}, mutate...)...)
	b.setTestPrincipal(func(remote string) string {
		host, _, _ := net.SplitHostPort(remote)
		switch host {
		case aliceIP:
			return "User:alice"
		case bobIP:
			return "User:bob"
		case adminIP:
			return "User:admin"
		case opsIP:
			return "User:ops"
		}
		return anonymousPrincipal
	})
	return b
}

// rawAs dials b from ip: a raw connection of that test principal.
func rawAs(t testing.TB, b *Broker, ip string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatalf("dialing %s from %s: %v", b.Addr(), ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c, fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("authz-test"))}
}
