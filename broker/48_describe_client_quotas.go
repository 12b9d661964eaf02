package broker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// DescribeClientQuotas: v0-1
//
// Behavior:
// Lists the stored client quotas (AlterClientQuotas) of the entities that
// match the filter, as Kafka's ClientQuotasImage.describe: each component
// names an entity type (user, client-id, ip) and matches an exact name
// (MATCH_TYPE_EXACT), the default entity (MATCH_TYPE_DEFAULT, null name)
// or any entity that has the type (MATCH_TYPE_SPECIFIED); with strict set
// an entity matches only if it has no other types. An empty or repeated
// entity type, a match string where none belongs (or none where one
// does), or ip combined with user or client-id is INVALID_REQUEST; an
// unknown entity type or match type UNSUPPORTED_VERSION, each with
// Kafka's message. Every stored key is shown, enforced or not
// (controller_mutation_rate, connection_creation_rate).
//
// Authorization: DESCRIBE_CONFIGS on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 is flexible; no other change.
func init() { regKey(48, 0, 1, (*Broker).handleDescribeClientQuotas) }

// Kafka's client quota entity types.
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"
)

// quotaFilter is a checked DescribeClientQuotas filter: per entity type,
// what its component asks for.
type quotaFilter struct {
	exact  map[string]state.QuotaName // MATCH_TYPE_EXACT and MATCH_TYPE_DEFAULT
	any    map[string]bool            // MATCH_TYPE_SPECIFIED
	strict bool
}

func (b *Broker) handleDescribeClientQuotas(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if az := b.authz(r); !az.cluster(aclOperationDescribeConfigs) {
		resp.ErrorCode, resp.ErrorMessage = clusterAuthorizationFailed()
		return resp, nil
	}
	f, kerrv, msg := newQuotaFilter(req)
	if kerrv != nil {
		resp.ErrorCode, resp.ErrorMessage = kerrv.Code, &msg
		return resp, nil
	}
	// Null entries mean an error to Kafka's clients: a success without
	// matches is an empty array.
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, q := range b.quotas.snapshot() {
		if !f.matches(q.Entity) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		e.Entity = describeQuotaEntity(q.Entity)
		for _, k := range sortedKeys(q.Values) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}

func newQuotaFilter(req *kmsg.DescribeClientQuotasRequest) (quotaFilter, *kerr.Error, string) {
	f := quotaFilter{exact: map[string]state.QuotaName{}, any: map[string]bool{}, strict: req.Strict}
	for _, c := range req.Components {
		typ := c.EntityType
		_, inExact := f.exact[typ]
		switch {
		case typ == "":
			return f, kerr.InvalidRequest, "Invalid empty entity type."
		case inExact || f.any[typ]:
			return f, kerr.InvalidRequest, fmt.Sprintf("Entity type %s cannot appear more than once in the filter.", typ)
		case typ != quotaEntityUser && typ != quotaEntityClientID && typ != quotaEntityIP:
			return f, kerr.UnsupportedVersion, "Unsupported entity type " + typ
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return f, kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null."
			}
			f.exact[typ] = state.QuotaName{Set: true, Name: *c.Match}
		case kmsg.QuotasMatchTypeDefault:
			if c.Match != nil {
				return f, kerr.InvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
			}
			f.exact[typ] = defaultName
		case kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return f, kerr.InvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
			}
			f.any[typ] = true
		default:
			return f, kerr.UnsupportedVersion, fmt.Sprintf("Unknown match type %d", c.MatchType)
		}
	}
	has := func(typ string) bool { _, ok := f.exact[typ]; return ok || f.any[typ] }
	if has(quotaEntityIP) && (has(quotaEntityUser) || has(quotaEntityClientID)) {
		return f, kerr.InvalidRequest, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."
	}
	return f, nil, ""
}

func quotaEntityParts(e state.QuotaEntity) map[string]state.QuotaName {
	m := map[string]state.QuotaName{}
	for typ, n := range map[string]state.QuotaName{quotaEntityUser: e.User, quotaEntityClientID: e.ClientID, quotaEntityIP: e.IP} {
		if n.Set {
			m[typ] = n
		}
	}
	return m
}

func (f quotaFilter) matches(e state.QuotaEntity) bool {
	parts := quotaEntityParts(e)
	if f.strict && len(parts) != len(f.exact)+len(f.any) {
		return false
	}
	for typ, want := range f.exact {
		if got, ok := parts[typ]; !ok || got != want {
			return false
		}
	}
	for typ := range f.any {
		if _, ok := parts[typ]; !ok {
			return false
		}
	}
	return true
}

// describeQuotaEntity is an entity as the responses name it: user,
// client-id, ip in that order, a default with a null name.
func describeQuotaEntity(e state.QuotaEntity) []kmsg.DescribeClientQuotasResponseEntryEntity {
	var out []kmsg.DescribeClientQuotasResponseEntryEntity
	for _, p := range []struct {
		typ string
		n   state.QuotaName
	}{{quotaEntityUser, e.User}, {quotaEntityClientID, e.ClientID}, {quotaEntityIP, e.IP}} {
		if !p.n.Set {
			continue
		}
		x := kmsg.NewDescribeClientQuotasResponseEntryEntity()
		x.Type = p.typ
		if !p.n.Default {
			name := p.n.Name
			x.Name = &name
		}
		out = append(out, x)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// snapshot copies the stored quotas, ordered by entity (user, client id,
// ip; defaults first) so responses are stable.
func (q *quotaSet) snapshot() []state.ClientQuota {
	q.mu.RLock()
	out := make([]state.ClientQuota, 0, len(q.entities))
	for e, vs := range q.entities {
		out = append(out, state.ClientQuota{Entity: e, Values: vs})
	}
	q.mu.RUnlock()
	nameCmp := func(a, b state.QuotaName) int {
		if c := cmp.Compare(quotaNameRank(a), quotaNameRank(b)); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	}
	slices.SortFunc(out, func(a, b state.ClientQuota) int {
		if c := nameCmp(a.Entity.User, b.Entity.User); c != 0 {
			return c
		}
		if c := nameCmp(a.Entity.ClientID, b.Entity.ClientID); c != 0 {
			return c
		}
		return nameCmp(a.Entity.IP, b.Entity.IP)
	})
	return out
}

func quotaNameRank(n state.QuotaName) int {
	switch {
	case !n.Set:
		return 0
	case n.Default:
		return 1
	}
	return 2
}
