package broker

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// quotaEnt builds a request entity: pairs of type and name, "" for the
// default (null name).
func quotaEnt(kv ...string) []kmsg.AlterClientQuotasRequestEntryEntity {
	var out []kmsg.AlterClientQuotasRequestEntryEntity
	for i := 0; i < len(kv); i += 2 {
		e := kmsg.NewAlterClientQuotasRequestEntryEntity()
		e.Type = kv[i]
		if kv[i+1] != "" {
			e.Name = str(kv[i+1])
		}
		out = append(out, e)
	}
	return out
}

func quotaOp(key string, v float64) kmsg.AlterClientQuotasRequestEntryOp {
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = key, v
	return op
}

func alterQuotas(t *testing.T, rc *rawConn, validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasResponse {
	t.Helper()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Version = 1
	req.ValidateOnly = validateOnly
	req.Entries = entries
	resp := rc.roundTrip(req).(*kmsg.AlterClientQuotasResponse)
	if len(resp.Entries) != len(entries) {
		t.Fatalf("%d results for %d entries", len(resp.Entries), len(entries))
	}
	return resp
}

func quotaEntry(ent []kmsg.AlterClientQuotasRequestEntryEntity, ops ...kmsg.AlterClientQuotasRequestEntryOp) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	e.Entity, e.Ops = ent, ops
	return e
}

func mustSetQuotas(t *testing.T, rc *rawConn, entries ...kmsg.AlterClientQuotasRequestEntry) {
	t.Helper()
	for i, r := range alterQuotas(t, rc, false, entries...).Entries {
		if r.ErrorCode != 0 {
			t.Fatalf("entry %d: %s %v", i, errName(r.ErrorCode), r.ErrorMessage)
		}
	}
}

// describeQuotas returns the matching entities as "user=alice,client-id=<default>"
// strings mapped to their values, or the top-level error.
func describeQuotas(t *testing.T, rc *rawConn, strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) (map[string]map[string]float64, int16, string) {
	t.Helper()
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Version = 1
	req.Components, req.Strict = comps, strict
	resp := rc.roundTrip(req).(*kmsg.DescribeClientQuotasResponse)
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return nil, resp.ErrorCode, msg
	}
	out := map[string]map[string]float64{}
	for _, e := range resp.Entries {
		var parts []string
		for _, x := range e.Entity {
			n := "<default>"
			if x.Name != nil {
				n = *x.Name
			}
			parts = append(parts, x.Type+"="+n)
		}
		vs := map[string]float64{}
		for _, v := range e.Values {
			vs[v.Key] = v.Value
		}
		out[strings.Join(parts, ",")] = vs
	}
	return out, 0, ""
}

func comp(typ string, match kmsg.QuotasMatchType, name *string) kmsg.DescribeClientQuotasRequestComponent {
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = typ, match, name
	return c
}

// AlterClientQuotas refuses what Kafka refuses, with Kafka's messages, and
// changes nothing of a refused entry.
func TestAlterClientQuotasRefusals(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	rc := dialRaw(t, b)
	for _, tc := range []struct {
		name  string
		entry kmsg.AlterClientQuotasRequestEntry
		code  int16
		msg   string
	}{
		{"empty entity", quotaEntry(nil, quotaOp("producer_byte_rate", 1)), kerr.InvalidRequest.Code, "Invalid empty client quota entity"},
		{"unknown type", quotaEntry(quotaEnt("group", "g"), quotaOp("producer_byte_rate", 1)), kerr.InvalidRequest.Code, "Unhandled client quota entity type: group"},
		{"empty name", quotaEntry(quotaEnt("user", ""), quotaOp("producer_byte_rate", 1)), 0, ""},
		{"type twice", quotaEntry(quotaEnt("user", "a", "user", "b"), quotaOp("producer_byte_rate", 1)), kerr.InvalidRequest.Code, "duplicate entity entry user"},
		{"ip with user", quotaEntry(quotaEnt("user", "a", "ip", "1.2.3.4"), quotaOp("connection_creation_rate", 1)), kerr.InvalidRequest.Code, "Invalid empty client quota entity"},
		{"bad ip", quotaEntry(quotaEnt("ip", "not an ip"), quotaOp("connection_creation_rate", 1)), kerr.InvalidRequest.Code, "is not a valid IP"},
		{"unknown key", quotaEntry(quotaEnt("user", "a"), quotaOp("producer_byte_rat", 1)), kerr.InvalidRequest.Code, "Invalid configuration key producer_byte_rat"},
		{"ip key on user", quotaEntry(quotaEnt("user", "a"), quotaOp("connection_creation_rate", 1)), kerr.InvalidRequest.Code, "Invalid configuration key connection_creation_rate"},
		{"fractional long", quotaEntry(quotaEnt("user", "a"), quotaOp("producer_byte_rate", 1.5)), kerr.InvalidRequest.Code, "Configuration producer_byte_rate must be a Long value"},
		{"negative long", quotaEntry(quotaEnt("user", "a"), quotaOp("consumer_byte_rate", -5)), kerr.InvalidRequest.Code, "must be a Long value"},
		{"nan", quotaEntry(quotaEnt("user", "a"), quotaOp("request_percentage", math.NaN())), kerr.InvalidRequest.Code, "finite"},
		{"key twice", quotaEntry(quotaEnt("user", "a"), quotaOp("producer_byte_rate", 1), quotaOp("producer_byte_rate", 2)), kerr.InvalidRequest.Code, "Duplicate quota key producer_byte_rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "empty name" {
				// A default entity is a null name; an empty string is refused.
				tc.entry.Entity[0].Name = str("")
				tc.code, tc.msg = kerr.InvalidRequest.Code, "Empty user not supported"
			}
			r := alterQuotas(t, rc, false, tc.entry).Entries[0]
			if r.ErrorCode != tc.code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, tc.msg) {
				t.Fatalf("got %s %v, want %s containing %q", errName(r.ErrorCode), r.ErrorMessage, errName(tc.code), tc.msg)
			}
		})
	}
	// An entity twice in one request: neither applied.
	dup := alterQuotas(t, rc, false, quotaEntry(quotaEnt("user", "x"), quotaOp("producer_byte_rate", 1)),
		quotaEntry(quotaEnt("user", "x"), quotaOp("consumer_byte_rate", 1)))
	for _, r := range dup.Entries {
		wantCode(t, "duplicate entity", r.ErrorCode, kerr.InvalidRequest.Code)
	}
	if got, _, _ := describeQuotas(t, rc, false); len(got) != 0 {
		t.Fatalf("refused entries stored: %v", got)
	}
	if b.quotas.on.Load() {
		t.Fatal("quotas switched on by refused entries")
	}
}

// Set, describe with every match type, validate_only, remove, and the
// describe filter's refusals.
func TestDescribeClientQuotas(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	rc := dialRaw(t, b)
	if r := alterQuotas(t, rc, true, quotaEntry(quotaEnt("user", "v"), quotaOp("producer_byte_rate", 1))).Entries[0]; r.ErrorCode != 0 {
		t.Fatalf("validate_only: %s", errName(r.ErrorCode))
	}
	mustSetQuotas(t, rc,
		quotaEntry(quotaEnt("user", "alice"), quotaOp("producer_byte_rate", 1024), quotaOp("request_percentage", 50)),
		quotaEntry(quotaEnt("user", "alice", "client-id", "app"), quotaOp("consumer_byte_rate", 2048)),
		quotaEntry(quotaEnt("user", ""), quotaOp("producer_byte_rate", 4096)),
		quotaEntry(quotaEnt("client-id", ""), quotaOp("controller_mutation_rate", 3)),
		quotaEntry(quotaEnt("ip", "10.0.0.1"), quotaOp("connection_creation_rate", 7)),
	)
	exact, def, any := kmsg.QuotasMatchTypeExact, kmsg.QuotasMatchTypeDefault, kmsg.QuotasMatchTypeAny
	for _, tc := range []struct {
		name   string
		strict bool
		comps  []kmsg.DescribeClientQuotasRequestComponent
		want   []string
	}{
		{"all", false, nil, []string{"user=alice", "user=alice,client-id=app", "user=<default>", "client-id=<default>", "ip=10.0.0.1"}},
		{"users strict (kafka-configs --describe --entity-type users)", true, []kmsg.DescribeClientQuotasRequestComponent{comp("user", any, nil)},
			[]string{"user=alice", "user=<default>"}},
		{"users", false, []kmsg.DescribeClientQuotasRequestComponent{comp("user", any, nil)},
			[]string{"user=alice", "user=alice,client-id=app", "user=<default>"}},
		{"exact alice strict", true, []kmsg.DescribeClientQuotasRequestComponent{comp("user", exact, str("alice"))}, []string{"user=alice"}},
		{"alice with any client", true, []kmsg.DescribeClientQuotasRequestComponent{comp("user", exact, str("alice")), comp("client-id", any, nil)},
			[]string{"user=alice,client-id=app"}},
		{"default user", false, []kmsg.DescribeClientQuotasRequestComponent{comp("user", def, nil)}, []string{"user=<default>"}},
		{"default client", false, []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", def, nil)}, []string{"client-id=<default>"}},
		{"ip", false, []kmsg.DescribeClientQuotasRequestComponent{comp("ip", any, nil)}, []string{"ip=10.0.0.1"}},
		{"nobody", false, []kmsg.DescribeClientQuotasRequestComponent{comp("user", exact, str("bob"))}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, code, msg := describeQuotas(t, rc, tc.strict, tc.comps...)
			if code != 0 {
				t.Fatalf("%s: %s", errName(code), msg)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for _, w := range tc.want {
				if _, ok := got[w]; !ok {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
	got, _, _ := describeQuotas(t, rc, true, comp("user", exact, str("alice")))
	if v := got["user=alice"]; v["producer_byte_rate"] != 1024 || v["request_percentage"] != 50 || len(v) != 2 {
		t.Fatalf("alice's values %v", v)
	}
	if got, _, _ := describeQuotas(t, rc, true, comp("user", exact, str("v"))); len(got) != 0 {
		t.Fatalf("validate_only stored %v", got)
	}

	// Remove one key, then the last: the entity goes.
	rm := quotaOp("request_percentage", 0)
	rm.Remove = true
	mustSetQuotas(t, rc, quotaEntry(quotaEnt("user", "alice"), rm))
	got, _, _ = describeQuotas(t, rc, true, comp("user", exact, str("alice")))
	if v := got["user=alice"]; len(v) != 1 || v["producer_byte_rate"] != 1024 {
		t.Fatalf("after removing request_percentage: %v", got)
	}
	rm.Key = "producer_byte_rate"
	mustSetQuotas(t, rc, quotaEntry(quotaEnt("user", "alice"), rm))
	if got, _, _ = describeQuotas(t, rc, true, comp("user", exact, str("alice"))); len(got) != 0 {
		t.Fatalf("after removing every key: %v", got)
	}

	for _, tc := range []struct {
		name  string
		comps []kmsg.DescribeClientQuotasRequestComponent
		code  int16
		msg   string
	}{
		{"empty type", []kmsg.DescribeClientQuotasRequestComponent{comp("", any, nil)}, kerr.InvalidRequest.Code, "Invalid empty entity type."},
		{"type twice", []kmsg.DescribeClientQuotasRequestComponent{comp("user", any, nil), comp("user", def, nil)}, kerr.InvalidRequest.Code, "cannot appear more than once"},
		{"unknown type", []kmsg.DescribeClientQuotasRequestComponent{comp("group", any, nil)}, kerr.UnsupportedVersion.Code, "Unsupported entity type group"},
		{"exact without name", []kmsg.DescribeClientQuotasRequestComponent{comp("user", exact, nil)}, kerr.InvalidRequest.Code, "MATCH_TYPE_EXACT"},
		{"default with name", []kmsg.DescribeClientQuotasRequestComponent{comp("user", def, str("a"))}, kerr.InvalidRequest.Code, "MATCH_TYPE_DEFAULT"},
		{"any with name", []kmsg.DescribeClientQuotasRequestComponent{comp("user", any, str("a"))}, kerr.InvalidRequest.Code, "MATCH_TYPE_SPECIFIED"},
		{"unknown match", []kmsg.DescribeClientQuotasRequestComponent{comp("user", 9, nil)}, kerr.UnsupportedVersion.Code, "Unknown match type 9"},
		{"ip and user", []kmsg.DescribeClientQuotasRequestComponent{comp("ip", any, nil), comp("user", any, nil)}, kerr.InvalidRequest.Code, "IP filter component"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, msg := describeQuotas(t, rc, false, tc.comps...)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %s %q, want %s containing %q", errName(code), msg, errName(tc.code), tc.msg)
			}
		})
	}
}

// Quotas are in the state store: a restarted broker describes and
// enforces them.
func TestClientQuotasSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sameDir := func(c *Config) { c.LogDirs = []string{dir} }
	b1 := newTestBroker(t, sameDir)
	mustSetQuotas(t, dialRaw(t, b1), quotaEntry(quotaEnt("user", "alice"), quotaOp("producer_byte_rate", 1024)),
		quotaEntry(quotaEnt("ip", ""), quotaOp("connection_creation_rate", 5)))
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := newTestBroker(t, sameDir)
	got, code, _ := describeQuotas(t, dialRaw(t, b2), false)
	if code != 0 || got["user=alice"]["producer_byte_rate"] != 1024 || got["ip=<default>"]["connection_creation_rate"] != 5 {
		t.Fatalf("after restart: %v (%s)", got, errName(code))
	}
	if !b2.quotas.on.Load() {
		t.Fatal("the restored producer quota is not enforced")
	}
	if limit, _, ok := b2.quotas.resolve(quotaProduce, "alice", "any"); !ok || limit != 1024 {
		t.Fatalf("alice's producer quota after restart: %v %v", limit, ok)
	}
}

// Describe needs DESCRIBE_CONFIGS and alter ALTER_CONFIGS on the cluster.
func TestClientQuotasAuthz(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, ops := rawAs(t, b, aliceIP), rawAs(t, b, opsIP)
	entry := quotaEntry(quotaEnt("user", "alice"), quotaOp("producer_byte_rate", 1024))
	wantCode(t, "alter denied", alterQuotas(t, alice, false, entry).Entries[0].ErrorCode, codeClusterAuth)
	_, code, _ := describeQuotas(t, alice, false)
	wantCode(t, "describe denied", code, codeClusterAuth)
	mustSetQuotas(t, ops, entry)
	if got, code, _ := describeQuotas(t, ops, false); code != 0 || len(got) != 1 {
		t.Fatalf("describe allowed: %v %s", got, errName(code))
	}
}

// Resolution follows Kafka's precedence, and usage is shared as Kafka's
// metric tags share it.
func TestQuotaResolution(t *testing.T) {
	t.Parallel()
	n, d := named, defaultName
	var none state.QuotaName
	all := []state.ClientQuota{
		{Entity: state.QuotaEntity{User: n("u"), ClientID: n("c")}, Values: map[string]float64{"producer_byte_rate": 1}},
		{Entity: state.QuotaEntity{User: n("u"), ClientID: d}, Values: map[string]float64{"producer_byte_rate": 2}},
		{Entity: state.QuotaEntity{User: n("u"), ClientID: none}, Values: map[string]float64{"producer_byte_rate": 3}},
		{Entity: state.QuotaEntity{User: d, ClientID: n("c")}, Values: map[string]float64{"producer_byte_rate": 4}},
		{Entity: state.QuotaEntity{User: d, ClientID: d}, Values: map[string]float64{"producer_byte_rate": 5}},
		{Entity: state.QuotaEntity{User: d, ClientID: none}, Values: map[string]float64{"producer_byte_rate": 6}},
		{Entity: state.QuotaEntity{User: none, ClientID: n("c")}, Values: map[string]float64{"producer_byte_rate": 7}},
		{Entity: state.QuotaEntity{User: none, ClientID: d}, Values: map[string]float64{"producer_byte_rate": 8}},
	}
	for drop := range all {
		q := newQuotaSet(11, time.Second, all[drop:])
		limit, tags, ok := q.resolve(quotaProduce, "u", "c")
		if !ok || limit != float64(drop+1) {
			t.Fatalf("with levels %d..8: limit %v %v, want %d", drop+1, limit, ok, drop+1)
		}
		wantTags := map[int]quotaTags{2: {"u", ""}, 5: {"u", ""}, 6: {"", "c"}, 7: {"", "c"}}[drop]
		if wantTags == (quotaTags{}) {
			wantTags = quotaTags{"u", "c"}
		}
		if tags != wantTags {
			t.Errorf("level %d: tags %+v, want %+v", drop+1, tags, wantTags)
		}
	}
	q := newQuotaSet(11, time.Second, all[:1])
	if _, _, ok := q.resolve(quotaProduce, "u", "other"); ok {
		t.Fatal("a user+client-id quota applied to another client id")
	}
	if _, _, ok := q.resolve(quotaFetch, "u", "c"); ok {
		t.Fatal("a producer quota applied to fetches")
	}
	// An empty client id matches only defaults.
	q = newQuotaSet(11, time.Second, all[7:])
	if limit, tags, ok := q.resolve(quotaProduce, "u", ""); !ok || limit != 8 || tags != (quotaTags{"", ""}) {
		t.Fatalf("empty client id: %v %+v %v", limit, tags, ok)
	}
}

// The rate and throttle time are Kafka's: the sum over the samples divided
// by at least quota.window.num-1 windows; throttle = over/quota x span.
func TestQuotaSensorThrottle(t *testing.T) {
	t.Parallel()
	q := newQuotaSet(11, time.Second, nil)
	for _, tc := range []struct {
		name   string
		limit  float64
		steps  [][2]float64 // (ms since start, value)
		wantMs int64        // throttle after the last step
	}{
		{"within", 100, [][2]float64{{0, 1000}}, 0},
		{"burst over ten windows", 100, [][2]float64{{0, 2000}}, 10000},
		{"spread", 100, [][2]float64{{0, 500}, {5000, 500}, {9999, 99}}, 0},
		{"old samples expire", 100, [][2]float64{{0, 5000}, {11000, 100}}, 0},
		{"zero quota", 0, [][2]float64{{0, 1}}, 11000},
		{"huge overshoot", 1, [][2]float64{{0, 1e12}}, math.MaxInt32},
		{"negative quota", -1, [][2]float64{{0, 1}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &quotaSensor{}
			var got int64
			for _, st := range tc.steps {
				got = s.record(q, st[1], tc.limit, 1_000_000+int64(st[0]))
			}
			if got != tc.wantMs {
				t.Fatalf("throttle %d ms, want %d", got, tc.wantMs)
			}
		})
	}
}
