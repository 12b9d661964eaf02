package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/settings"
)

// DescribeConfigs: v1-4
//
// Behavior:
// TOPIC lists every topic config (or the requested ConfigNames; null or
// empty means all). The value is the topic's own (DYNAMIC_TOPIC_CONFIG),
// else the dynamic broker default (DYNAMIC_DEFAULT_BROKER_CONFIG), else
// the static broker config: STATIC_BROKER_CONFIG when it differs from the
// built-in default, DEFAULT_CONFIG otherwise (the Config struct cannot
// tell "set to the default" from "not set"). Synonyms list that chain.
//
// GROUP lists the consumer group configs: the group's own (GROUP_CONFIG),
// else the broker's group.consumer.* value.
//
// BROKER named by this node's id lists every broker config of Kafka 4.4
// and kmirror's own settings (broker_configs_kafka.go), with this node's
// dynamic value (DYNAMIC_BROKER_CONFIG), the cluster default
// (DYNAMIC_DEFAULT_BROKER_CONFIG), the static value (STATIC_BROKER_CONFIG)
// and Kafka's default (DEFAULT_CONFIG) as synonyms, in that order; a topic
// shows the same chain after its own value. BROKER "" lists only the
// cluster-default dynamic configs, as Kafka does. Another id is
// INVALID_REQUEST. BROKER_LOGGER, CLUSTER_MIRROR and the other types are
// INVALID_REQUEST; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
//
// Authorization: DESCRIBE_CONFIGS on the resource, checked first: a TOPIC
// on the topic (else TOPIC_AUTHORIZATION_FAILED), a BROKER or
// BROKER_LOGGER on the cluster (CLUSTER_AUTHORIZATION_FAILED), a
// CLUSTER_MIRROR on the mirror (CLUSTER_MIRROR_AUTHORIZATION_FAILED), as
// Kafka's ConfigHelper.
//
// Version notes:
// v0 (removed by Kafka 4.0) is not served. v1 synonyms and the source
// enum, v2 same as v1, v3 documentation and config types, v4 flexible.
func init() { regKey(32, 1, 4, (*Broker).handleDescribeConfigs) }

// describeOpts are the request's optional parts.
type describeOpts struct {
	synonyms bool
	docs     bool
	// names filters the configs; nil means all.
	names map[string]bool
}

func (o *describeOpts) wants(name string) bool { return o.names == nil || o.names[name] }

type configSynonym = kmsg.DescribeConfigsResponseResourceConfigConfigSynonym

func (b *Broker) handleDescribeConfigs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	az := b.authz(r)
	for i := range req.Resources {
		rr := &req.Resources[i]
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		opts := describeOpts{synonyms: req.IncludeSynonyms, docs: req.IncludeDocumentation}
		if len(rr.ConfigNames) > 0 {
			opts.names = make(map[string]bool, len(rr.ConfigNames))
			for _, n := range rr.ConfigNames {
				opts.names[n] = true
			}
		}
		cerr := az.configDenied(aclOperationDescribeConfigs, rr.ResourceType, rr.ResourceName)
		switch {
		case cerr != nil:
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			res.Configs, cerr = b.describeTopicConfigs(rr.ResourceName, &opts)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			res.Configs, cerr = b.describeBrokerConfigs(rr.ResourceName, &opts)
		case rr.ResourceType == configResourceClusterMirror:
			res.Configs, cerr = b.describeMirrorConfigs(rr.ResourceName, &opts)
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			res.Configs, cerr = b.describeGroupConfigs(rr.ResourceName, &opts)
		default:
			cerr = unsupportedResource(rr.ResourceType)
		}
		if cerr != nil {
			cerr.set(&res.ErrorCode, &res.ErrorMessage)
			res.Configs = nil
		}
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}

// staticSource is the source of a static broker value: a value other than
// the built-in default must come from server.properties or a flag.
func staticSource(v, builtin string) kmsg.ConfigSource {
	if v != builtin {
		return kmsg.ConfigSourceStaticBrokerConfig
	}
	return kmsg.ConfigSourceDefaultConfig
}

func synonym(name, value string, src kmsg.ConfigSource) configSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, &value, src
	return s
}

// configEntry builds a described config whose value and source are the
// head of chain (null and DEFAULT_CONFIG for an empty chain).
func configEntry(name string, typ settings.Type, doc string, readOnly bool, chain []configSynonym, opts *describeOpts) kmsg.DescribeConfigsResponseResourceConfig {
	rc := kmsg.NewDescribeConfigsResponseResourceConfig()
	rc.Name, rc.ReadOnly, rc.ConfigType = name, readOnly, kmsg.ConfigType(typ)
	rc.Source = kmsg.ConfigSourceDefaultConfig
	if len(chain) > 0 {
		rc.Value, rc.Source = chain[0].Value, chain[0].Source
	}
	rc.IsDefault = rc.Source == kmsg.ConfigSourceDefaultConfig
	if opts.synonyms {
		rc.ConfigSynonyms = chain
	}
	if opts.docs {
		rc.Documentation = &doc
	}
	return rc
}

func (b *Broker) describeTopicConfigs(name string, opts *describeOpts) ([]kmsg.DescribeConfigsResponseResourceConfig, *configError) {
	if err := validateTopicName(name); err != nil {
		return nil, newConfigError(kerr.InvalidTopicException, "%v", err)
	}
	t := b.partitions.Topic(name)
	if t == nil {
		return nil, newConfigError(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", name)
	}
	own := t.Configs()
	node, dyn := b.nodeSnapshot(), b.dynamicSnapshot()
	builtin := DefaultConfig()
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for i := range topicConfigs {
		tc := &topicConfigs[i]
		if !opts.wants(tc.Name) {
			continue
		}
		var chain []configSynonym
		if v, ok := own[tc.Name]; ok {
			chain = append(chain, synonym(tc.Name, v, kmsg.ConfigSourceDynamicTopicConfig))
		}
		if br := tc.Synonym(); br != "" {
			if v, ok := node[br]; ok {
				chain = append(chain, synonym(br, v, kmsg.ConfigSourceDynamicBrokerConfig))
			}
			if v, ok := dyn[br]; ok {
				chain = append(chain, synonym(br, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig))
			}
			v := tc.def(&b.cfg)
			chain = append(chain, synonym(br, v, staticSource(v, tc.def(&builtin))))
		}
		rc := configEntry(tc.Name, tc.Type, tc.FullDoc(), !tc.Dynamic, chain, opts)
		if len(chain) == 0 {
			// A config without a broker synonym and not set on the
			// topic: Kafka's built-in default, no synonyms.
			v := tc.def(&b.cfg)
			rc.Value = &v
		}
		out = append(out, rc)
	}
	return out, nil
}

func (b *Broker) describeBrokerConfigs(name string, opts *describeOpts) ([]kmsg.DescribeConfigsResponseResourceConfig, *configError) {
	if cerr := b.checkBrokerName(name, true); cerr != nil {
		return nil, cerr
	}
	if name != "" {
		return b.describeNodeConfigs(opts), nil
	}
	dyn := b.dynamicSnapshot()
	names := make([]string, 0, len(dyn))
	for n := range dyn {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, n := range names {
		if !opts.wants(n) {
			continue
		}
		// Only kmirror's own configs are documented at the cluster default.
		def, doc := brokerConfigDef(n), ""
		if _, own := lookupBrokerConfig(n); own {
			doc = def.FullDoc()
		}
		chain := []configSynonym{synonym(n, dyn[n], kmsg.ConfigSourceDynamicDefaultBrokerConfig)}
		out = append(out, brokerConfigEntry(&def, doc, false, chain, opts))
	}
	return out, nil
}

// describeMirrorConfigs lists a cluster mirror's configs, as set at create
// or by IncrementalAlterConfigs (source DYNAMIC: there is no default to
// fall back to per mirror).
func (b *Broker) describeMirrorConfigs(name string, opts *describeOpts) ([]kmsg.DescribeConfigsResponseResourceConfig, *configError) {
	admin := b.admin()
	if admin == nil {
		return nil, unsupportedResource(configResourceClusterMirror)
	}
	configs, ok := admin.MirrorConfigs(name)
	if !ok {
		return nil, newConfigError(kerr.InvalidRequest, "No cluster mirror %s.", name)
	}
	keys := make([]string, 0, len(configs))
	for k := range configs {
		if opts.names == nil || opts.names[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(keys))
	for _, k := range keys {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		v := configs[k]
		c.Name, c.Value, c.Source = k, &v, kmsg.ConfigSourceDynamicTopicConfig
		c.ConfigType = kmsg.ConfigTypeString
		def, _ := admin.MirrorConfigDef(k)
		if opts.docs && def.Doc != "" {
			c.Documentation = &def.Doc
		}
		if def.IsSensitive() {
			// A source credential: as Kafka does for passwords, the
			// value is never sent back (null, IsSensitive).
			c.Value, c.IsSensitive = nil, true
			c.ConfigType = kmsg.ConfigTypePassword
		}
		out = append(out, c)
	}
	return out, nil
}
