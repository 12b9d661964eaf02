package broker

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/partition"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v2-7
//
// Behavior:
// Checks run in the order of Kafka's controller, and a topic answers the
// first failure: a name given twice in one request (INVALID_REQUEST, one
// answer per name), the reserved __cluster_metadata (INVALID_REQUEST), an
// invalid name or one that differs from an existing topic only by '.'
// versus '_' (INVALID_TOPIC_EXCEPTION), an existing topic
// (TOPIC_ALREADY_EXISTS), a null or invalid config value (INVALID_CONFIG),
// then the replica assignment, replication factor and partition count.
// NumPartitions -1 is num.partitions, ReplicationFactor -1
// default.replication.factor; a replication factor above the usable
// brokers (registered, unfenced, not shutting down; on a bare node this
// one) is INVALID_REPLICATION_FACTOR with Kafka's message. The replicas
// are placed as Kafka's controller places them (meta.PlaceReplicas:
// leaders spread, the other replicas round-robin after them). A manual
// assignment (which, as in Kafka, needs NumPartitions and
// ReplicationFactor -1) is placed as given, its first replica leading and
// all in the ISR: each list must name registered brokers, each once, and
// every list have as many replicas as the first (INVALID_REPLICA_ASSIGNMENT,
// Kafka's messages). A request that would write more than
// Kafka's 10000 metadata records per operation (one per topic, config and
// partition) fails whole with POLICY_VIOLATION, as Kafka's controller
// does. ValidateOnly runs every check and creates nothing.
//
// kmirror differs from Kafka: creation is synchronous, so TimeoutMillis is
// ignored and the topic is usable as soon as the answer is sent. A
// validate-only answer carries a zero topic ID where Kafka invents a
// random one that is never used.
//
// Authorization: CREATE on the cluster allows every topic; otherwise each
// topic needs CREATE on itself, else TOPIC_AUTHORIZATION_FAILED
// ("Authorization failed.") right after the duplicate and
// __cluster_metadata checks, so nothing about the topic is revealed. The
// v5+ answer carries the partition count, replication factor and configs
// only with DESCRIBE_CONFIGS on the topic; without it they are left out
// and ConfigErrorCode (TopicConfigErrorCode) is TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// v2 is the floor (Kafka 4.0); v5 flexible, with the partition count,
// replication factor and configs of the new topic (every topic config with
// its effective value and source, sorted by name); v7 topic IDs.
func init() { regKey(19, 2, 7, (*Broker).handleCreateTopics) }

// adminOpMaxRecords is Kafka's bound on the metadata records one admin
// operation may write (QuorumController.MAX_RECORDS_PER_USER_OP). kmirror
// writes no such records, but refusing the same requests keeps tools that
// were tested against Kafka honest and bounds the work of one request.
const adminOpMaxRecords = 10000

// errBatchTooLargeMsg is Kafka's message past adminOpMaxRecords.
const errBatchTooLargeMsg = "Unable to perform excessively large batch operation."

// clusterMetadataTopic is the KRaft metadata log's name, which Kafka
// refuses to create as a topic.
const clusterMetadataTopic = "__cluster_metadata"

// topicCreation is one topic of a CreateTopics request once checked.
type topicCreation struct {
	name       string
	partitions int32
	// rf is the replication factor; replicas, when set, the manual
	// assignment by partition.
	rf       int
	replicas [][]int32
	configs  map[string]string
	err      *kerr.Error
	msg      string
}

func (c *topicCreation) fail(err *kerr.Error, format string, args ...any) {
	c.err, c.msg = err, fmt.Sprintf(format, args...)
}

func (b *Broker) handleCreateTopics(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)

	uses := make(map[string]int, len(req.Topics))
	for i := range req.Topics {
		uses[req.Topics[i].Topic]++
	}
	az := b.authz(r)
	createAll := az.clusterQuietly(aclOperationCreate)
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	// Check everything first: the record bound applies to the request as a
	// whole, so nothing may be created before every topic is checked.
	plans := make([]topicCreation, 0, len(req.Topics))
	records := 0
	for i := range req.Topics {
		rt := &req.Topics[i]
		if uses[rt.Topic] == 0 {
			continue // a duplicate already answered
		}
		c, denied := az.createTopicDenied(rt, uses[rt.Topic] > 1, createAll)
		if !denied {
			c = b.checkTopicCreation(rt, uses[rt.Topic] > 1)
		}
		uses[rt.Topic] = 0
		if c.err == nil {
			records += 1 + len(c.configs) + int(c.partitions)
		}
		plans = append(plans, c)
	}
	if records > adminOpMaxRecords {
		for i := range plans {
			plans[i].fail(kerr.PolicyViolation, errBatchTooLargeMsg)
		}
	}

	for i := range plans {
		c := &plans[i]
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = c.name
		if c.err == nil && !req.ValidateOnly {
			t, err := b.partitions.Create(c.name, c.partitions, c.configs, [16]byte{}, "",
				partition.Placement{RF: c.rf, Replicas: c.replicas})
			switch {
			case errors.Is(err, partition.ErrTopicExists): // created since the check
				c.fail(kerr.TopicAlreadyExists, "Topic '%s' already exists.", c.name)
			case err != nil:
				b.log.Warn("creating a topic failed", "topic", c.name, "err", err)
				c.fail(metadataWriteError(err), "%v", err)
			default:
				st.TopicID = t.ID()
			}
		}
		if c.err != nil {
			st.ErrorCode = c.err.Code
			st.ErrorMessage = &c.msg
			resp.Topics = append(resp.Topics, st)
			continue
		}
		switch {
		case req.Version < 5:
		case !az.topicQuietly(aclOperationDescribeConfigs, c.name):
			st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
		default:
			st.NumPartitions = c.partitions
			st.ReplicationFactor = int16(c.rf)
			st.Configs = b.createdTopicConfigs(c.configs)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// checkTopicCreation runs every check of one requested topic and resolves
// its partition count and configs.
func (b *Broker) checkTopicCreation(rt *kmsg.CreateTopicsRequestTopic, duplicate bool) topicCreation {
	c := topicCreation{name: rt.Topic}
	if duplicate {
		c.fail(kerr.InvalidRequest, "Duplicate topic name.")
		return c
	}
	if rt.Topic == clusterMetadataTopic {
		c.fail(kerr.InvalidRequest, "Creation of internal topic %s is prohibited.", clusterMetadataTopic)
		return c
	}
	if err := validateTopicName(rt.Topic); err != nil {
		c.fail(kerr.InvalidTopicException, "%v", err)
		return c
	}
	if b.partitions.Topic(rt.Topic) != nil {
		c.fail(kerr.TopicAlreadyExists, "Topic '%s' already exists.", rt.Topic)
		return c
	}
	if other := b.collidingTopic(rt.Topic); other != "" {
		c.fail(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", rt.Topic, other)
		return c
	}
	if !b.checkCreationConfigs(rt, &c) {
		return c
	}
	switch {
	case len(rt.ReplicaAssignment) > 0:
		b.checkCreationAssignment(rt, &c)
	case rt.ReplicationFactor < -1 || rt.ReplicationFactor == 0:
		c.fail(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	case rt.NumPartitions < -1 || rt.NumPartitions == 0:
		c.fail(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
	default:
		c.partitions, c.rf = rt.NumPartitions, int(rt.ReplicationFactor)
		if c.partitions == -1 {
			c.partitions = b.cfg.NumPartitions
		}
		if c.rf == -1 {
			c.rf = int(b.cfg.DefaultReplicationFactor)
		}
		if err, msg := b.checkReplicationFactor(c.rf); err != nil {
			c.fail(err, "%s", msg)
		}
	}
	return c
}

// checkReplicationFactor is the failure (nil if none) and its message
// when the usable brokers cannot hold rf replicas of each partition.
func (b *Broker) checkReplicationFactor(rf int) (*kerr.Error, string) {
	switch msg, err := b.replicationFactorMsg(rf); {
	case err != nil:
		return kerr.KafkaStorageError, err.Error()
	case msg != "":
		return kerr.InvalidReplicationFactor, msg
	}
	return nil, ""
}

// checkCreationConfigs validates the requested configs into c.configs; a
// config named twice keeps its last value, as Kafka's map does.
func (b *Broker) checkCreationConfigs(rt *kmsg.CreateTopicsRequestTopic, c *topicCreation) bool {
	var nulls []string
	for _, cf := range rt.Configs {
		if cf.Value == nil {
			nulls = append(nulls, cf.Name)
		}
	}
	if len(nulls) > 0 {
		c.fail(kerr.InvalidConfig, "Null value not supported for topic configs: %s", strings.Join(nulls, ","))
		return false
	}
	c.configs = make(map[string]string, len(rt.Configs))
	for _, cf := range rt.Configs {
		if err := validateTopicConfig(cf.Name, *cf.Value); err != nil {
			c.fail(kerr.InvalidConfig, "%v", err)
			return false
		}
		c.configs[cf.Name] = *cf.Value
	}
	return true
}

// checkCreationAssignment checks a manual assignment as Kafka's controller
// does and sets the partition count, replication factor and replicas from
// it; the first list sets the replica count the others must have.
func (b *Broker) checkCreationAssignment(rt *kmsg.CreateTopicsRequestTopic, c *topicCreation) {
	if rt.ReplicationFactor != -1 {
		c.fail(kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
		return
	}
	if rt.NumPartitions != -1 {
		c.fail(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
		return
	}
	seen := make(map[int32][]int32, len(rt.ReplicaAssignment))
	rf := -1
	for _, a := range rt.ReplicaAssignment {
		if seen[a.Partition] != nil {
			c.fail(kerr.InvalidReplicaAssignment, "Found multiple manual partition assignments for partition %d", a.Partition)
			return
		}
		if msg := b.checkReplicaAssignment(a.Replicas, rf); msg != "" {
			c.fail(kerr.InvalidReplicaAssignment, "%s", msg)
			return
		}
		seen[a.Partition], rf = a.Replicas, len(a.Replicas)
	}
	c.replicas = make([][]int32, len(seen))
	for i := range c.replicas {
		if c.replicas[i] = seen[int32(i)]; c.replicas[i] == nil {
			c.fail(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
			return
		}
	}
	c.partitions, c.rf = int32(len(seen)), rf
}

// checkReplicaAssignment returns why one partition's manual replica list
// is refused ("" if it is not), with Kafka's messages: every replica must
// be a broker of the metadata image (on one node, this node alone), named
// once, and the list must have rf replicas unless rf is -1 (the first
// list of a new topic).
func (b *Broker) checkReplicaAssignment(replicas []int32, rf int) string {
	if len(replicas) == 0 {
		return "The manual partition assignment includes an empty replica list."
	}
	im := b.image()
	sorted := slices.Sorted(slices.Values(replicas))
	for i, id := range sorted {
		if im.Broker(id) == nil {
			return fmt.Sprintf("The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 && sorted[i-1] == id {
			return fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	if rf != -1 && len(replicas) != rf {
		return fmt.Sprintf("The manual partition assignment includes a partition with %d replica(s), "+
			"but this is not consistent with previous partitions, which have %d replica(s).", len(replicas), rf)
	}
	return ""
}

// collidingTopic returns an existing topic whose name equals name once '.'
// and '_' are unified (they collide in metric names), or "".
func (b *Broker) collidingTopic(name string) string {
	if !strings.ContainsAny(name, "._") {
		return ""
	}
	unified := strings.ReplaceAll(name, ".", "_")
	for _, t := range b.partitions.Topics() {
		if other := t.Name(); other != name && strings.ContainsAny(other, "._") && strings.ReplaceAll(other, ".", "_") == unified {
			return other
		}
	}
	return ""
}

// createdTopicConfigs lists every topic config of a topic created with
// configs, as CreateTopics v5+ answers: the effective value and where it
// comes from, sorted by name (topicConfigs is).
func (b *Broker) createdTopicConfigs(configs map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	// A broker value equal to the built-in default is reported as
	// DEFAULT_CONFIG: the Config struct cannot tell "set to the default"
	// from "not set".
	builtin := DefaultConfig()
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(topicConfigs))
	for i := range topicConfigs {
		tc := &topicConfigs[i]
		e := kmsg.NewCreateTopicsResponseTopicConfig()
		e.Name = tc.Name
		v, explicit := configs[tc.Name]
		src := kmsg.ConfigSourceDynamicTopicConfig
		if !explicit {
			var dynamic bool
			v, dynamic = b.topicConfigDefault(tc)
			switch {
			case dynamic:
				src = kmsg.ConfigSourceDynamicDefaultBrokerConfig
			case tc.Synonym() != "" && v != tc.def(&builtin):
				src = kmsg.ConfigSourceStaticBrokerConfig
			default:
				src = kmsg.ConfigSourceDefaultConfig
			}
		}
		e.Source = int8(src)
		e.Value = &v
		out = append(out, e)
	}
	return out
}
