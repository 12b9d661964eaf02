package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-2
//
// Behavior:
// The legacy, non-incremental alteration: a resource's listed configs
// replace all of its dynamic configs, and any config not listed returns
// to its default. TOPIC and BROKER (this node's id for its per-broker
// configs, or "" for the cluster default) only. Every entry is checked
// before anything changes, as in IncrementalAlterConfigs: a resource named
// twice, a duplicate config name, a null value, another node's id and
// BROKER_LOGGER (never alterable here, as in Kafka) or CLUSTER_MIRROR
// resources are INVALID_REQUEST; an unknown config and an invalid topic
// value are INVALID_CONFIG; a broker config Kafka refuses at runtime is
// INVALID_REQUEST with Kafka's message (broker_configs_kafka.go).
// ValidateOnly checks and answers without changing anything.
//
// Authorization: ALTER_CONFIGS on the resource, checked after the
// duplicate check and before anything else: a TOPIC on the topic (else
// TOPIC_AUTHORIZATION_FAILED), a BROKER or BROKER_LOGGER on the cluster
// (CLUSTER_AUTHORIZATION_FAILED), as Kafka's controller.
//
// Version notes:
// v1 same as v0, v2 flexible.
func init() { regKey(33, 0, 2, (*Broker).handleAlterConfigs) }

func (b *Broker) handleAlterConfigs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	counts := countResources(len(req.Resources), func(i int) resourceKey {
		return resourceKey{req.Resources[i].ResourceType, req.Resources[i].ResourceName}
	})
	az := b.authz(r)
	for i := range req.Resources {
		rr := &req.Resources[i]
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		cerr := errDuplicateResource
		if counts[resourceKey{rr.ResourceType, rr.ResourceName}] == 1 {
			if cerr = az.configDenied(aclOperationAlterConfigs, rr.ResourceType, rr.ResourceName); cerr == nil {
				cerr = b.replaceConfigs(rr, req.ValidateOnly)
			}
		}
		if cerr != nil {
			cerr.set(&res.ErrorCode, &res.ErrorMessage)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}

// replaceConfigs checks and applies one resource's new config set.
func (b *Broker) replaceConfigs(rr *kmsg.AlterConfigsRequestResource, validateOnly bool) *configError {
	cs := rr.Configs
	if cerr := checkConfigNames(len(cs),
		func(i int) string { return cs[i].Name },
		func(i int) *string { return cs[i].Value },
		func(int) bool { return false },
	); cerr != nil {
		return cerr
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	tg, cerr := b.alterTarget(rr.ResourceType, rr.ResourceName)
	if cerr != nil {
		return cerr
	}
	next := make(map[string]string, len(cs))
	for i := range cs {
		if cerr := tg.validate(cs[i].Name, *cs[i].Value); cerr != nil {
			return cerr
		}
		next[cs[i].Name] = *cs[i].Value
	}
	if validateOnly {
		return nil
	}
	return b.commit(tg, tg.current(b), next)
}
