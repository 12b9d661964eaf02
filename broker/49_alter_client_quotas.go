package broker

import (
	"fmt"
	"maps"
	"math"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// AlterClientQuotas: v0-1
//
// Behavior:
// Sets and removes client quotas (kafka-configs --alter --entity-type
// users|clients|ips), validated as Kafka's ClientQuotaControlManager does:
// an entity is a user, a client id, both, or an ip, each named or the
// default (null name); an empty entity, a repeated or unknown entity type,
// an empty name, ip with another type, or an ip that is not an IP address
// is INVALID_REQUEST. Users and client ids take producer_byte_rate and
// consumer_byte_rate (whole numbers), request_percentage and
// controller_mutation_rate; ips take connection_creation_rate (a whole
// number). Any other key, a fractional value for a whole-number key, a key
// twice in one entry or an entity twice in one request is INVALID_REQUEST
// with Kafka's message, and nothing of that entry changes. Values are not
// range-checked, as in Kafka: 0 throttles everything, a negative
// request_percentage nothing (quotas.go); Kafka's whole-number check
// happens to refuse a negative byte rate ("must be a Long value"), and so
// does this one. A non-finite value is INVALID_REQUEST (Kafka would store
// it).
// A state store that cannot write answers KAFKA_STORAGE_ERROR with why,
// as the other admin APIs do. Remove deletes a key; removing one that is not set is not an
// error. With ValidateOnly nothing is stored. The valid entries are
// stored together, fsynced, and enforced from the next request.
//
// Enforced: producer_byte_rate, consumer_byte_rate, request_percentage.
// Stored and described only: controller_mutation_rate,
// connection_creation_rate.
//
// Authorization: ALTER_CONFIGS on the cluster, else every entry is
// CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 is flexible; no other change.
func init() { regKey(49, 0, 1, (*Broker).handleAlterClientQuotas) }

// quotaKeyWhole reports, for each key an entity kind accepts, whether its
// value must be a whole number (Kafka's LONG and INT quota configs).
var (
	userClientQuotaKeys = map[string]bool{quotaKeyProducerByteRate: true, quotaKeyConsumerByteRate: true,
		quotaKeyRequestPercentage: false, quotaKeyControllerMutationRate: false}
	ipQuotaKeys = map[string]bool{quotaKeyConnectionCreationRate: true}
)

func (b *Broker) handleAlterClientQuotas(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	resp.Entries = make([]kmsg.AlterClientQuotasResponseEntry, len(req.Entries))
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, x := range e.Entity {
			ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = x.Type, x.Name
			re.Entity = append(re.Entity, ee)
		}
		resp.Entries[i] = re
	}
	fail := func(i int, code int16, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = code, &msg
	}
	if az := b.authz(r); !az.cluster(aclOperationAlterConfigs) {
		for i := range resp.Entries {
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = clusterAuthorizationFailed()
		}
		return resp, nil
	}

	entities := make([]state.QuotaEntity, len(req.Entries))
	count := map[state.QuotaEntity]int{}
	for i, e := range req.Entries {
		ent, msg := checkQuotaEntity(e.Entity)
		if msg != "" {
			fail(i, kerr.InvalidRequest.Code, "%s", msg)
			continue
		}
		entities[i] = ent
		count[ent]++
	}

	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	var put []state.ClientQuota
	for i, e := range req.Entries {
		if resp.Entries[i].ErrorCode != 0 {
			continue
		}
		ent := entities[i]
		if count[ent] > 1 {
			fail(i, kerr.InvalidRequest.Code, "Ignoring duplicate entity %s", quotaEntityString(ent))
			continue
		}
		values, code, msg := applyQuotaOps(ent, b.quotas.values(ent), e.Ops)
		if code != 0 {
			fail(i, code, "%s", msg)
			continue
		}
		put = append(put, state.ClientQuota{Entity: ent, Values: values})
	}
	if req.ValidateOnly || len(put) == 0 {
		return resp, nil
	}
	if err := b.store.PutClientQuotas(put); err != nil {
		for i := range resp.Entries {
			if resp.Entries[i].ErrorCode == 0 {
				fail(i, kerr.KafkaStorageError.Code, "storing client quotas: %v", err)
			}
		}
		return resp, nil
	}
	for _, q := range put {
		b.quotas.set(q.Entity, q.Values)
	}
	return resp, nil
}

// checkQuotaEntity turns a request's entity into a state entity, or
// returns Kafka's message for why it is not one.
func checkQuotaEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (state.QuotaEntity, string) {
	var e state.QuotaEntity
	if len(parts) == 0 {
		return e, "Invalid empty client quota entity"
	}
	for _, p := range parts {
		var dst *state.QuotaName
		switch p.Type {
		case quotaEntityUser:
			dst = &e.User
		case quotaEntityClientID:
			dst = &e.ClientID
		case quotaEntityIP:
			dst = &e.IP
		default:
			return e, "Unhandled client quota entity type: " + p.Type
		}
		if dst.Set {
			return e, "Invalid empty client quota entity, duplicate entity entry " + p.Type
		}
		switch {
		case p.Name == nil:
			*dst = defaultName
		case *p.Name == "":
			return e, "Empty " + p.Type + " not supported"
		default:
			*dst = state.QuotaName{Set: true, Name: *p.Name}
		}
	}
	if e.IP.Set {
		if e.User.Set || e.ClientID.Set {
			return e, "Invalid empty client quota entity"
		}
		if !e.IP.Default && net.ParseIP(e.IP.Name) == nil {
			return e, e.IP.Name + " is not a valid IP or resolvable host."
		}
	}
	return e, ""
}

// applyQuotaOps returns cur with ops applied (a new map), or an error code
// and Kafka's message.
func applyQuotaOps(e state.QuotaEntity, cur map[string]float64, ops []kmsg.AlterClientQuotasRequestEntryOp) (map[string]float64, int16, string) {
	keys := userClientQuotaKeys
	if e.IP.Set {
		keys = ipQuotaKeys
	}
	seen := map[string]bool{}
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]float64{}
	}
	for _, op := range ops {
		if seen[op.Key] {
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("Duplicate quota key %s not updating quota for this entity %s", op.Key, quotaEntityString(e))
		}
		seen[op.Key] = true
		if op.Remove {
			delete(out, op.Key)
			continue
		}
		whole, ok := keys[op.Key]
		switch {
		case !ok:
			return nil, kerr.InvalidRequest.Code, "Invalid configuration key " + op.Key
		case math.IsNaN(op.Value) || math.IsInf(op.Value, 0):
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("Configuration %s must be a finite number", op.Key)
		case whole && math.Abs(math.Trunc(op.Value+1e-6)-op.Value) > 1e-6:
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("Configuration %s must be a Long value", op.Key)
		}
		out[op.Key] = op.Value
	}
	return out, 0, ""
}

// quotaEntityString names an entity as Kafka's ClientQuotaEntity prints.
func quotaEntityString(e state.QuotaEntity) string {
	var parts []string
	for _, p := range []struct {
		typ string
		n   state.QuotaName
	}{{quotaEntityUser, e.User}, {quotaEntityClientID, e.ClientID}, {quotaEntityIP, e.IP}} {
		switch {
		case !p.n.Set:
		case p.n.Default:
			parts = append(parts, p.typ+"=null")
		default:
			parts = append(parts, p.typ+"="+p.n.Name)
		}
	}
	return "ClientQuotaEntity(entries={" + strings.Join(parts, ", ") + "})"
}

// values is the stored quotas of e (nil if none). The map is shared:
// callers must not modify it.
func (q *quotaSet) values(e state.QuotaEntity) map[string]float64 {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.entities[e]
}
