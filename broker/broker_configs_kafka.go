package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafkaconfigs"
	"github.com/kmirror/kmirror/internal/settings"
)

// The dynamic broker configs as Apache Kafka 4.4 has them: every config
// Kafka lets operators change at runtime (internal/kafkaconfigs, generated
// from Kafka's jars) may be set on this node (BROKER "<node.id>") or as
// the cluster default (BROKER ""), is persisted and is described with its
// source. kmirror applies only the broker defaults of topic configs
// (log.retention.ms, log.segment.bytes, message.max.bytes...: the
// brokerConfigs table), which reach every topic that does not override
// them, and a TLS listener's listener.name.<l>.ssl.keystore.* (reloaded at
// once, tls_reload.go). Every other dynamic config (thread pools, quotas,
// replication throttles, SASL login settings...) is stored and described
// only: kmirror has no thread pool or quota for it to change, and saying
// "accepted" beats refusing what Kafka's tools and operators' scripts send.

// validateBrokerConfig checks one dynamic broker config to set, with
// Kafka's refusals and messages (DynamicBrokerConfig.validateConfigs,
// answered as INVALID_REQUEST by ConfigAdminManager):
//
//   - a config Kafka cannot change at runtime: "Cannot update these configs
//     dynamically: [broker.id]". kmirror also refuses it at the cluster
//     default, where Kafka 4.4's controller stores it without effect, and
//     refuses the listener settings Kafka changes per broker, since
//     kmirror cannot rebind its listeners at runtime;
//   - a keystore or truststore config without a listener prefix: "These
//     security configs can be dynamically updated only per-listener using
//     the listener prefix: [ssl.keystore.location]";
//   - a value not of the config's type: "Invalid value x for configuration
//     num.io.threads: Not a number of type INT".
//
// A per-broker-only config at the cluster default is stored, as Kafka 4.4
// does; brokers ignore it there, and so does the per-broker describe.
// Names no Kafka release knows are refused with INVALID_CONFIG: Kafka
// stores them, kmirror would hold a typo the operator believes in force.
func validateBrokerConfig(name, value string) *configError {
	bc, own := lookupBrokerConfig(name)
	kc, known := kafkaconfigs.Lookup(name)
	_, base, prefixed := kafkaconfigs.SplitListener(name)
	switch {
	case own && !bc.Dynamic, !own && known && !kc.Dynamic():
		return newConfigError(kerr.InvalidRequest, "Cannot update these configs dynamically: [%s]", name)
	case known && kc.ListenerOnly:
		return newConfigError(kerr.InvalidRequest,
			"These security configs can be dynamically updated only per-listener using the listener prefix: [%s]", name)
	case !own && !known && !prefixed:
		return newConfigError(kerr.InvalidConfig, "unknown broker config %q: no Kafka release knows it", name)
	}
	if prefixed {
		kc, _ = kafkaconfigs.Lookup(base)
	}
	if msg := settings.TypeError(kafkaConfigType(kc.Type), value); msg != "" {
		return newConfigError(kerr.InvalidRequest, "Invalid value %s for configuration %s: %s", value, name, msg)
	}
	if own {
		if err := bc.Validate(value); err != nil {
			return newConfigError(kerr.InvalidConfig, "%v", err)
		}
	}
	return nil
}

// knownBrokerConfig reports whether name may be a dynamic broker config's
// name (valid or not): kmirror's own, or a name some Kafka release knows.
func knownBrokerConfig(name string) bool {
	_, own := lookupBrokerConfig(name)
	return own || kafkaconfigs.Known(name)
}

// kafkaConfigDoc documents the broker configs kmirror accepts and does
// not apply.
const kafkaConfigDoc = "An Apache Kafka broker config that kmirror accepts and does not apply."

// brokerConfigDef is the definition of any broker config name: kmirror's
// own; else one made from Kafka's (internal/kafkaconfigs), a listener
// override taking its base config's type; else a STRING that may be set.
func brokerConfigDef(name string) settings.Def {
	if bc, ok := lookupBrokerConfig(name); ok {
		return bc.Def
	}
	def := settings.Def{Name: name, Type: settings.String, Doc: kafkaConfigDoc, Dynamic: true}
	if kc, ok := kafkaconfigs.Lookup(name); ok {
		def.Type, def.Dynamic = kafkaConfigType(kc.Type), kc.Dynamic()
	} else if _, base, prefixed := kafkaconfigs.SplitListener(name); prefixed {
		kc, _ := kafkaconfigs.Lookup(base)
		def.Type = kafkaConfigType(kc.Type)
	}
	return def
}

// kafkaConfigType maps a ConfigDef type onto DescribeConfigs' ConfigType.
func kafkaConfigType(t kafkaconfigs.Type) settings.Type {
	return [...]settings.Type{
		kafkaconfigs.TypeBoolean: settings.Boolean, kafkaconfigs.TypeString: settings.String,
		kafkaconfigs.TypeInt: settings.Int, kafkaconfigs.TypeShort: settings.Short,
		kafkaconfigs.TypeLong: settings.Long, kafkaconfigs.TypeDouble: settings.Double,
		kafkaconfigs.TypeList: settings.List, kafkaconfigs.TypeClass: settings.Class,
		kafkaconfigs.TypePassword: settings.Password,
	}[t]
}

// perBrokerOnly reports whether Kafka ignores name at the cluster default:
// PerBroker configs and their listener overrides, except the listener
// overrides of cluster-wide configs (max.connections...), as Kafka's
// DynamicBrokerConfig.perBrokerConfigs.
func perBrokerOnly(name string) bool {
	if kc, ok := kafkaconfigs.Lookup(name); ok {
		return kc.Mode == kafkaconfigs.PerBroker
	}
	if _, base, ok := kafkaconfigs.SplitListener(name); ok {
		kc, _ := kafkaconfigs.Lookup(base)
		return kc.Mode != kafkaconfigs.ClusterWide
	}
	return false
}

// staticBrokerChain is the static end of a broker config's synonyms: the
// node's own value (kmirror's settings, or a Kafka setting given in
// server.properties that kmirror does not apply), else Kafka's default.
func (b *Broker) staticBrokerChain(name string) []configSynonym {
	if bc, ok := lookupBrokerConfig(name); ok {
		v, ok := bc.static(&b.cfg)
		if !ok {
			return nil
		}
		builtin := DefaultConfig()
		def, _ := bc.static(&builtin)
		return []configSynonym{synonym(name, v, staticSource(v, def))}
	}
	if v, ok := b.cfg.KafkaSettings[name]; ok {
		return []configSynonym{synonym(name, v, kmsg.ConfigSourceStaticBrokerConfig)}
	}
	if kc, ok := kafkaconfigs.Lookup(name); ok && kc.Default != nil {
		return []configSynonym{synonym(name, *kc.Default, kmsg.ConfigSourceDefaultConfig)}
	}
	return nil
}

// describeNodeConfigs lists this node's broker configs as Kafka lists a
// broker's: every config of the newest Kafka and kmirror's own, plus any
// other name set dynamically (listener overrides), sorted by name. The
// synonyms run from this node's dynamic value (DYNAMIC_BROKER_CONFIG)
// through the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG, unless Kafka
// ignores the config there) to the static value (STATIC_BROKER_CONFIG)
// or Kafka's default (DEFAULT_CONFIG). Passwords are never sent back.
func (b *Broker) describeNodeConfigs(opts *describeOpts) []kmsg.DescribeConfigsResponseResourceConfig {
	node, dyn := b.nodeSnapshot(), b.dynamicSnapshot()
	names := make([]string, 0, len(brokerConfigs)+len(kafkaconfigs.All()))
	for i := range brokerConfigs {
		names = append(names, brokerConfigs[i].Name)
	}
	for _, kc := range kafkaconfigs.All() {
		if kc.Mode != kafkaconfigs.Removed {
			names = append(names, kc.Name)
		}
	}
	for n := range node {
		names = append(names, n)
	}
	for n := range dyn {
		if !perBrokerOnly(n) {
			names = append(names, n)
		}
	}
	for n := range b.cfg.KafkaSettings {
		names = append(names, n)
	}
	slices.Sort(names)
	names = slices.Compact(names)

	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, n := range names {
		if !opts.wants(n) {
			continue
		}
		def := brokerConfigDef(n)
		readOnly := !def.Dynamic
		var chain []configSynonym
		if v, ok := node[n]; ok && !readOnly {
			chain = append(chain, synonym(n, v, kmsg.ConfigSourceDynamicBrokerConfig))
		}
		if v, ok := dyn[n]; ok && !readOnly && !perBrokerOnly(n) {
			chain = append(chain, synonym(n, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig))
		}
		chain = append(chain, b.staticBrokerChain(n)...)
		out = append(out, brokerConfigEntry(&def, def.FullDoc(), readOnly, chain, opts))
	}
	return out
}

// brokerConfigEntry is configEntry with sensitive values hidden (null,
// IsSensitive), as Kafka describes passwords.
func brokerConfigEntry(def *settings.Def, doc string, readOnly bool, chain []configSynonym, opts *describeOpts) kmsg.DescribeConfigsResponseResourceConfig {
	if def.IsSensitive() {
		for i := range chain {
			chain[i].Value = nil
		}
	}
	rc := configEntry(def.Name, def.Type, doc, readOnly, chain, opts)
	rc.IsSensitive = def.IsSensitive()
	return rc
}
