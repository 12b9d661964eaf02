package broker

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/settings"
)

// IncrementalAlterConfigs: v0-1
//
// Behavior:
// Changes the listed configs of a TOPIC, of the BROKER (named by this
// node's id for its per-broker configs, or "" for the cluster default;
// the node's win over the default), or of a GROUP (group_configs.go: its
// consumer.session.timeout.ms and consumer.heartbeat.interval.ms, within
// Kafka's bounds, else INVALID_CONFIG). Ops: SET, DELETE, APPEND and SUBTRACT
// (list configs such as cleanup.policy; the list starts from the value in
// effect when the resource does not set it). Every entry of a resource is
// checked before anything changes, then the resource changes at once:
// one refused entry leaves the resource as it was. Refusals: a resource
// named twice, a duplicate config name, a null value for SET, APPEND or
// SUBTRACT, an unknown op, another node's id, BROKER_LOGGER and
// CLUSTER_MIRROR resources are INVALID_REQUEST; an unknown config, an
// invalid topic value and APPEND or SUBTRACT on a non-list config are
// INVALID_CONFIG; a broker config Kafka refuses at runtime (read-only, a
// keystore without a listener prefix, a value not of its type) is
// INVALID_REQUEST with Kafka's message, as Kafka's ConfigAdminManager
// answers (broker_configs_kafka.go). Every config Kafka 4.4 changes at
// runtime is accepted; only the broker defaults of topic configs are
// applied (they reach every topic that does not override them), the
// others are stored and described.
// Topics of a cluster mirror may be altered too: with KIP-1279 the
// mirror's sync overwrites them later. ValidateOnly checks and answers
// without changing anything.
//
// Authorization: ALTER_CONFIGS on the resource, checked after the
// duplicate check and before anything else: a TOPIC on the topic (else
// TOPIC_AUTHORIZATION_FAILED), a BROKER or BROKER_LOGGER on the cluster
// (CLUSTER_AUTHORIZATION_FAILED), a CLUSTER_MIRROR on the mirror
// (CLUSTER_MIRROR_AUTHORIZATION_FAILED), as Kafka's controller.
//
// Version notes:
// v1 is flexible.
func init() { regKey(44, 0, 1, (*Broker).handleIncrementalAlterConfigs) }

func (b *Broker) handleIncrementalAlterConfigs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	counts := countResources(len(req.Resources), func(i int) resourceKey {
		return resourceKey{req.Resources[i].ResourceType, req.Resources[i].ResourceName}
	})
	az := b.authz(r)
	for i := range req.Resources {
		rr := &req.Resources[i]
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		cerr := errDuplicateResource
		if counts[resourceKey{rr.ResourceType, rr.ResourceName}] == 1 {
			if cerr = az.configDenied(aclOperationAlterConfigs, rr.ResourceType, rr.ResourceName); cerr == nil {
				cerr = b.incrementalAlter(rr, req.ValidateOnly)
			}
		}
		if cerr != nil {
			cerr.set(&res.ErrorCode, &res.ErrorMessage)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}

// incrementalAlter checks and applies one resource's operations.
func (b *Broker) incrementalAlter(rr *kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) *configError {
	cs := rr.Configs
	if cerr := checkConfigNames(len(cs),
		func(i int) string { return cs[i].Name },
		func(i int) *string { return cs[i].Value },
		func(i int) bool { return cs[i].Op == kmsg.IncrementalAlterConfigOpDelete },
	); cerr != nil {
		return cerr
	}
	for i := range cs {
		if op := cs[i].Op; op < kmsg.IncrementalAlterConfigOpSet || op > kmsg.IncrementalAlterConfigOpSubtract {
			return newConfigError(kerr.InvalidRequest, "Unknown operations type %d", int8(op))
		}
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	tg, cerr := b.alterTarget(rr.ResourceType, rr.ResourceName)
	if cerr != nil {
		return cerr
	}
	old := tg.current(b)
	next := tg.current(b)
	for i := range cs {
		c := &cs[i]
		if c.Op == kmsg.IncrementalAlterConfigOpDelete {
			// Deleting a name the resource holds is always fine, even
			// one an older kmirror knew and this one does not.
			if _, set := next[c.Name]; !set && !tg.known(c.Name) {
				return tg.validate(c.Name, "")
			}
			delete(next, c.Name)
			continue
		}
		v := *c.Value
		if c.Op == kmsg.IncrementalAlterConfigOpAppend || c.Op == kmsg.IncrementalAlterConfigOpSubtract {
			if !tg.known(c.Name) {
				return tg.validate(c.Name, v)
			}
			if !tg.isList(c.Name) {
				return newConfigError(kerr.InvalidConfig, "Can't %s to key %s because its type is not LIST.", c.Op, c.Name)
			}
			cur, set := next[c.Name]
			if !set {
				cur = tg.fallback(b, c.Name)
			}
			v = alterList(cur, v, c.Op == kmsg.IncrementalAlterConfigOpAppend)
		}
		if cerr := tg.validate(c.Name, v); cerr != nil {
			return cerr
		}
		next[c.Name] = v
	}
	if validateOnly {
		return nil
	}
	return b.commit(tg, old, next)
}

// alterList appends the elements of change missing from cur, or removes
// those present.
func alterList(cur, change string, add bool) string {
	list := settings.Items(cur)
	for _, e := range settings.Items(change) {
		i := slices.Index(list, e)
		switch {
		case add && i < 0:
			list = append(list, e)
		case !add && i >= 0:
			list = slices.Delete(list, i, i+1)
		}
	}
	return strings.Join(list, ",")
}
