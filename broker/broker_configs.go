package broker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/settings"
)

// brokerConfig is one broker config DescribeConfigs lists for the BROKER
// resource: the node's own settings (read-only, from server.properties or
// flags) and the broker defaults of topic configs (log.retention.ms...),
// which IncrementalAlterConfigs and AlterConfigs may change at runtime
// (Def.Dynamic).
type brokerConfig struct {
	settings.Def
	// static returns the value from the node's configuration; false for a
	// config without a value (described as null, as Kafka does).
	static func(c *Config) (string, bool)
	// topic is the topic config this one is the broker default of.
	topic *topicConfig
}

func joinListeners(ls []Listener) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = l.String()
	}
	return strings.Join(s, ",")
}

// nodeConfigs are the broker configs that are not topic defaults, all
// read-only: Kafka cannot change num.partitions or
// auto.create.topics.enable at runtime either.
var nodeConfigs = []brokerConfig{
	{Def: settings.Def{Name: "advertised.listeners", Type: settings.String,
		Doc: "Listeners Metadata tells clients to use; unset means listeners."},
		static: func(c *Config) (string, bool) {
			return joinListeners(c.AdvertisedListeners), len(c.AdvertisedListeners) > 0
		}},
	{Def: settings.Def{Name: "auto.create.topics.enable", Type: settings.Boolean,
		Doc: "Create a topic when a client asks Metadata for one that does not exist."},
		static: func(c *Config) (string, bool) { return strconv.FormatBool(c.AutoCreateTopics), true }},
	{Def: settings.Def{Name: "default.replication.factor", Type: settings.Int,
		Doc: "Replication factor of auto-created topics and of CreateTopics without one."},
		static: func(c *Config) (string, bool) { return strconv.Itoa(int(c.DefaultReplicationFactor)), true }},
	{Def: settings.Def{Name: "offsets.topic.num.partitions", Type: settings.Int,
		Doc: "Partitions of __consumer_offsets when it is created."},
		static: func(c *Config) (string, bool) { return strconv.Itoa(int(c.OffsetsTopicPartitions)), true }},
	{Def: settings.Def{Name: "offsets.topic.replication.factor", Type: settings.Short,
		Doc: "Replicas of __consumer_offsets when it is created (fewer while fewer brokers are usable)."},
		static: func(c *Config) (string, bool) { return strconv.Itoa(int(c.OffsetsTopicReplicationFactor)), true }},
	{Def: settings.Def{Name: "transaction.state.log.num.partitions", Type: settings.Int,
		Doc: "Partitions of __transaction_state when it is created."},
		static: func(c *Config) (string, bool) { return strconv.Itoa(int(c.TransactionTopicPartitions)), true }},
	{Def: settings.Def{Name: "transaction.state.log.replication.factor", Type: settings.Short,
		Doc: "Replicas of __transaction_state when it is created (fewer while fewer brokers are usable)."},
		static: func(c *Config) (string, bool) { return strconv.Itoa(int(c.TransactionTopicReplicationFactor)), true }},
	{Def: settings.Def{Name: "transaction.state.log.min.isr", Type: settings.Int,
		Doc: "min.insync.replicas of __transaction_state when it is created (at most its replication factor)."},
		static: func(c *Config) (string, bool) { return strconv.Itoa(int(c.TransactionTopicMinISR)), true }},
	{Def: settings.Def{Name: "listeners", Type: settings.String,
		Doc: "Addresses the broker binds, NAME://host:port, comma-separated."},
		static: func(c *Config) (string, bool) { return joinListeners(c.Listeners), true }},
	{Def: settings.Def{Name: "log.dirs", Type: settings.String,
		Doc: "Directories holding partition logs, comma-separated."},
		static: func(c *Config) (string, bool) { return strings.Join(c.LogDirs, ","), true }},
	{Def: settings.Def{Name: "node.id", Type: settings.Int, Zero: settings.ZeroLiteral,
		Doc: "This node's id."},
		static: func(c *Config) (string, bool) { return strconv.Itoa(int(c.NodeID)), true }},
	{Def: settings.Def{Name: "num.partitions", Type: settings.Int,
		Doc: "Partition count of auto-created topics and of CreateTopics without one."},
		static: func(c *Config) (string, bool) { return strconv.Itoa(int(c.NumPartitions)), true }},
	{Def: settings.Def{Name: "socket.request.max.bytes", Type: settings.Int,
		Doc: "Largest request frame; a larger one closes the connection."},
		static: func(c *Config) (string, bool) { return strconv.Itoa(int(c.SocketRequestMaxBytes)), true }},
}

// brokerConfigs is every broker config, sorted by name: nodeConfigs and
// the broker synonym of every topic config, which takes the topic config's
// type, check and zero.
var brokerConfigs = func() []brokerConfig {
	out := slices.Clone(nodeConfigs)
	for i := range topicConfigs {
		tc := &topicConfigs[i]
		name := tc.Synonym()
		if name == "" {
			continue
		}
		def := tc.Def
		def.Name, def.Synonyms = name, nil
		def.Doc = "Default of the topic config " + tc.Name + ": " + tc.Doc
		out = append(out, brokerConfig{Def: def, topic: tc,
			static: func(c *Config) (string, bool) { return tc.def(c), true }})
	}
	slices.SortFunc(out, func(a, b brokerConfig) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name {
			panic("BUG: broker config " + out[i].Name + " defined twice")
		}
	}
	return out
}()

func lookupBrokerConfig(name string) (*brokerConfig, bool) {
	i, ok := slices.BinarySearchFunc(brokerConfigs, name, func(c brokerConfig, n string) int {
		return strings.Compare(c.Name, n)
	})
	if !ok {
		return nil, false
	}
	return &brokerConfigs[i], true
}

// ConfigDef returns the definition of a BROKER resource config kmirror
// applies (its type, what 0 means, whether it may change at runtime), so
// that server.properties reads the same definition that DescribeConfigs
// and IncrementalAlterConfigs use; false for other names.
func ConfigDef(name string) (settings.Def, bool) {
	bc, ok := lookupBrokerConfig(name)
	if !ok {
		return settings.Def{}, false
	}
	return bc.Def, true
}

// errInvalidBrokerConfig marks a refused setDynamicConfigsLocked.
var errInvalidBrokerConfig = errors.New("invalid broker config")

// setDynamicConfigsLocked sets and deletes dynamic broker configs, this
// node's (node) or the cluster default, persists them and re-applies every
// topic's log config, so that a new default (say log.retention.ms) reaches
// the topics that do not override it. REQUIRES: b.adminMu held.
func (b *Broker) setDynamicConfigsLocked(node bool, set map[string]string, del []string) error {
	for name, v := range set {
		if cerr := validateBrokerConfig(name, v); cerr != nil {
			return fmt.Errorf("%w: %s", errInvalidBrokerConfig, cerr.msg)
		}
	}
	if err := b.reloadKeystores(node, set); err != nil {
		return err
	}
	store := b.store.SetBrokerConfigs
	if node {
		store = func(set map[string]string, del []string) error { return b.store.SetNodeConfigs(b.cfg.NodeID, set, del) }
	}
	if err := store(set, del); err != nil {
		return fmt.Errorf("storing broker configs: %w", err)
	}
	// Copy on write: describe handlers keep the map they read after
	// releasing dynMu.
	b.dynMu.Lock()
	cur := &b.dynamicConfigs
	if node {
		cur = &b.nodeConfigs
	}
	next := maps.Clone(*cur)
	if next == nil {
		next = map[string]string{}
	}
	maps.Copy(next, set)
	for _, name := range del {
		delete(next, name)
	}
	*cur = next
	b.dynMu.Unlock()
	return b.reapplyTopicConfigs()
}

// setOtherNodeConfigsLocked stores another node's dynamic configs, on the
// controller; that node applies them from the metadata log. Keystores
// are refused: only the node holding the files can check them.
// REQUIRES: b.adminMu held.
func (b *Broker) setOtherNodeConfigsLocked(id int32, set map[string]string, del []string) *configError {
	for name, v := range set {
		if _, _, ok := listenerKeystoreConfig(name); ok {
			return newConfigError(kerr.InvalidRequest, "%s of broker %d cannot be changed through the controller yet: "+
				"only broker %d can check its keystore", name, id, id)
		}
		if cerr := validateBrokerConfig(name, v); cerr != nil {
			return cerr
		}
	}
	if err := b.store.SetNodeConfigs(id, set, del); err != nil {
		b.log.Error("altering broker configs", "node", id, "err", err)
		return newConfigError(kerr.UnknownServerError, "altering the configs of broker %d: %v", id, err)
	}
	return nil
}

// dynamicSnapshot returns the cluster-default dynamic broker configs,
// nodeSnapshot this node's; the maps are never modified
// (setDynamicConfigsLocked replaces them), so callers may read them without
// dynMu.
func (b *Broker) dynamicSnapshot() map[string]string {
	b.dynMu.RLock()
	defer b.dynMu.RUnlock()
	return b.dynamicConfigs
}

func (b *Broker) nodeSnapshot() map[string]string {
	b.dynMu.RLock()
	defer b.dynMu.RUnlock()
	return b.nodeConfigs
}

// reapplyTopicConfigs recomputes every topic's log config after the
// dynamic broker defaults changed (partition.Manager.ReapplyConfigs).
func (b *Broker) reapplyTopicConfigs() error {
	if err := b.partitions.ReapplyConfigs(); err != nil {
		b.log.Error("applying new broker defaults to topics", "err", err)
		return err
	}
	return nil
}

// configResourceClusterMirror is KIP-1279's CLUSTER_MIRROR resource type,
// which kmsg does not know yet.
const configResourceClusterMirror kmsg.ConfigResourceType = 64

// configError is a resource's answer: a Kafka error code and message.
type configError struct {
	code int16
	msg  string
}

func newConfigError(err *kerr.Error, format string, args ...any) *configError {
	return &configError{code: err.Code, msg: fmt.Sprintf(format, args...)}
}

// set fills a response resource's code and message.
func (e *configError) set(code *int16, msg **string) {
	if e == nil {
		return
	}
	m := e.msg
	*code, *msg = e.code, &m
}

// unsupportedResource answers the resource types kmirror does not serve.
func unsupportedResource(typ kmsg.ConfigResourceType) *configError {
	switch typ {
	case kmsg.ConfigResourceTypeBrokerLogger:
		return newConfigError(kerr.InvalidRequest, "BROKER_LOGGER resources are not supported: kmirror has no runtime log levels")
	case configResourceClusterMirror:
		return newConfigError(kerr.InvalidRequest, "CLUSTER_MIRROR resources need the mirror control plane, which this node does not run")
	case kmsg.ConfigResourceTypeClientMetrics:
		return newConfigError(kerr.InvalidRequest, "%s resources are not supported", typ)
	}
	return newConfigError(kerr.InvalidRequest, "Unknown resource type %d", int8(typ))
}

// checkBrokerName accepts this node's id and "" (the cluster-wide
// default).
func (b *Broker) checkBrokerName(name string, describe bool) *configError {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return newConfigError(kerr.InvalidRequest, "Node id must be an integer, but it is: %s", name)
	}
	if int32(id) != b.cfg.NodeID {
		or := ""
		if describe {
			or = " or empty string"
		}
		return newConfigError(kerr.InvalidRequest, "Unexpected broker id, expected %d%s, but received %s", b.cfg.NodeID, or, name)
	}
	return nil
}

// configTarget is the resource an alteration changes: a topic, or (topic
// nil) the broker's dynamic configs, this node's (node) or the cluster
// default.
type configTarget struct {
	topic *partition.Topic
	node  bool
	// other is the id of another node whose configs these are, set on
	// the controller of a cluster (the alteration was forwarded from that
	// node); 0 with node: this node's.
	other int32
	// mirror names a CLUSTER_MIRROR resource, served by the control plane.
	mirror string
	admin  MirrorAdmin
	// group names a GROUP resource (group_configs.go).
	group string
}

// alterTarget resolves an AlterConfigs or IncrementalAlterConfigs resource.
func (b *Broker) alterTarget(typ kmsg.ConfigResourceType, name string) (configTarget, *configError) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if name == "" {
			return configTarget{}, newConfigError(kerr.InvalidRequest, "Default topic resources are not allowed.")
		}
		if err := validateTopicName(name); err != nil {
			return configTarget{}, newConfigError(kerr.InvalidTopicException, "%v", err)
		}
		t := b.partitions.Topic(name)
		if t == nil {
			return configTarget{}, newConfigError(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", name)
		}
		return configTarget{topic: t}, nil
	case kmsg.ConfigResourceTypeBroker:
		if id, ok := b.otherRegisteredBroker(name); ok {
			return configTarget{node: true, other: id}, nil
		}
		return configTarget{node: name != ""}, b.checkBrokerName(name, false)
	case kmsg.ConfigResourceTypeGroupConfig:
		return configTarget{group: name}, checkGroupName(name)
	case configResourceClusterMirror:
		admin := b.admin()
		if admin == nil {
			return configTarget{}, unsupportedResource(typ)
		}
		if _, ok := admin.MirrorConfigs(name); !ok {
			return configTarget{}, newConfigError(kerr.InvalidRequest, "No cluster mirror %s.", name)
		}
		return configTarget{mirror: name, admin: admin}, nil
	}
	return configTarget{}, unsupportedResource(typ)
}

// current copies the target's dynamic configs.
func (tg configTarget) current(b *Broker) map[string]string {
	if tg.admin != nil {
		cs, _ := tg.admin.MirrorConfigs(tg.mirror)
		return cs
	}
	if tg.topic != nil {
		return tg.topic.Configs()
	}
	if tg.group != "" {
		cs, err := b.store.GroupConfigs(tg.group)
		if err != nil {
			b.log.Warn("reading a group's configs", "group", tg.group, "err", err)
		}
		if cs == nil {
			cs = map[string]string{}
		}
		return cs
	}
	if tg.other != 0 {
		cs, err := b.store.NodeConfigs(tg.other)
		if err != nil {
			b.log.Warn("reading another node's broker configs", "node", tg.other, "err", err)
		}
		return cs
	}
	if tg.node {
		return maps.Clone(b.nodeSnapshot())
	}
	return maps.Clone(b.dynamicSnapshot())
}

// otherRegisteredBroker reports whether name is another registered node's
// id while this node is a cluster's controller: the node whose configs an
// alteration names forwarded it here, and it applies them when the
// metadata log brings them (Reconcile).
func (b *Broker) otherRegisteredBroker(name string) (int32, bool) {
	if !b.cfg.Cluster.Several() || !b.isController() || name == "" {
		return 0, false
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || int32(id) == b.cfg.NodeID {
		return 0, false
	}
	brokers, err := b.store.Brokers()
	if err != nil {
		return 0, false
	}
	return int32(id), slices.ContainsFunc(brokers, func(r state.BrokerRegistration) bool { return r.ID == int32(id) })
}

// validate checks one value to set.
func (tg configTarget) validate(name, value string) *configError {
	var err error
	switch {
	case tg.admin != nil:
		err = tg.admin.ValidateMirrorConfig(name, value)
	case tg.topic != nil:
		err = validateTopicConfig(name, value)
	case tg.group != "":
		return validateGroupConfig(name, value)
	default:
		return validateBrokerConfig(name, value)
	}
	if err != nil {
		return newConfigError(kerr.InvalidConfig, "%v", err)
	}
	return nil
}

// known reports whether name is a config of the target's kind.
func (tg configTarget) known(name string) bool {
	if tg.admin != nil {
		_, ok := tg.admin.MirrorConfigDef(name)
		return ok
	}
	if tg.topic != nil {
		_, ok := lookupTopicConfig(name)
		return ok
	}
	if tg.group != "" {
		_, ok := lookupGroupConfig(name)
		return ok
	}
	return knownBrokerConfig(name)
}

// isList reports whether name is a list config (APPEND and SUBTRACT).
func (tg configTarget) isList(name string) bool {
	if tg.admin != nil {
		def, _ := tg.admin.MirrorConfigDef(name)
		return def.Type == settings.List
	}
	if tg.topic != nil {
		tc, ok := lookupTopicConfig(name)
		return ok && tc.Type == settings.List
	}
	if tg.group != "" {
		return false
	}
	return brokerConfigDef(name).Type == settings.List
}

// fallback is the value APPEND and SUBTRACT start from when the target
// does not set name: the value in effect. (Kafka starts from the config's
// built-in default; the effective value is what an operator sees.)
func (tg configTarget) fallback(b *Broker, name string) string {
	if tg.admin != nil || tg.group != "" {
		return ""
	}
	if tg.topic != nil {
		if tc, ok := lookupTopicConfig(name); ok {
			v, _ := b.topicConfigDefault(tc)
			return v
		}
		return ""
	}
	if chain := b.staticBrokerChain(name); len(chain) > 0 {
		return *chain[0].Value // the static value, else Kafka's default
	}
	return ""
}

// commit stores the target's new dynamic configs and applies them.
// REQUIRES: b.adminMu held since old was read.
func (b *Broker) commit(tg configTarget, old, next map[string]string) *configError {
	if tg.admin != nil {
		if err := tg.admin.SetMirrorConfigs(tg.mirror, next); err != nil {
			return newConfigError(kerr.InvalidConfig, "%v", err)
		}
		return nil
	}
	if tg.topic != nil {
		if b.partitions.Topic(tg.topic.Name()) != tg.topic {
			return newConfigError(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", tg.topic.Name())
		}
		if err := b.partitions.SetConfigs(tg.topic, next); err != nil {
			b.log.Error("altering topic configs", "topic", tg.topic.Name(), "err", err)
			return newConfigError(kerr.UnknownServerError, "altering the configs of %s: %v", tg.topic.Name(), err)
		}
		return nil
	}
	set := map[string]string{}
	for name, v := range next {
		if ov, ok := old[name]; !ok || ov != v {
			set[name] = v
		}
	}
	var del []string
	for name := range old {
		if _, ok := next[name]; !ok {
			del = append(del, name)
		}
	}
	if len(set) == 0 && len(del) == 0 {
		return nil
	}
	if tg.group != "" {
		if err := b.store.SetGroupConfigs(tg.group, set, del); err != nil {
			b.log.Error("altering group configs", "group", tg.group, "err", err)
			return newConfigError(kerr.UnknownServerError, "altering the configs of group %s: %v", tg.group, err)
		}
		return nil
	}
	if tg.other != 0 {
		return b.setOtherNodeConfigsLocked(tg.other, set, del)
	}
	if err := b.setDynamicConfigsLocked(tg.node, set, del); err != nil {
		b.log.Error("altering broker configs", "err", err)
		return newConfigError(kerr.UnknownServerError, "altering broker configs: %v", err)
	}
	return nil
}

// resourceKey identifies a config resource in a request.
type resourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

// countResources counts each resource of a request: Kafka refuses every
// copy of a resource named twice.
func countResources(n int, key func(i int) resourceKey) map[resourceKey]int {
	counts := make(map[resourceKey]int, n)
	for i := range n {
		counts[key(i)]++
	}
	return counts
}

var errDuplicateResource = newConfigError(kerr.InvalidRequest, "Each resource must appear at most once.")

// checkConfigNames refuses duplicate names and null values (except where
// nullOK says a null is fine: DELETE), as Kafka does before anything else.
func checkConfigNames(n int, name func(i int) string, value func(i int) *string, nullOK func(i int) bool) *configError {
	seen := make(map[string]bool, n)
	for i := range n {
		if seen[name(i)] {
			return newConfigError(kerr.InvalidRequest, "Error due to duplicate config keys")
		}
		seen[name(i)] = true
	}
	var nulls []string
	for i := range n {
		if value(i) == nil && !nullOK(i) {
			nulls = append(nulls, name(i))
		}
	}
	if len(nulls) > 0 {
		return newConfigError(kerr.InvalidRequest, "Null value not supported for : %s", strings.Join(nulls, ", "))
	}
	return nil
}
