package broker

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/netio"
	"github.com/kmirror/kmirror/partition"
)

// Metadata: v0-13
//
// Behavior:
// Brokers, controller, cluster id and every partition's leader, leader
// epoch, replicas and ISR come from the metadata image (image.go); on one
// node, this node leads every partition with itself as the only replica.
// Each broker entry advertises the broker's listener named like the one
// the request came in on. A null topic list (v1+; empty in v0) lists every topic. A requested
// topic that does not exist is created with num.partitions when
// auto.create.topics.enable is on and the request allows it (always before
// v4), and answered at once, not with LEADER_NOT_AVAILABLE.
//
// Authorization: a listing of every topic silently leaves out the topics
// without DESCRIBE; a topic asked for by name without DESCRIBE answers
// TOPIC_AUTHORIZATION_FAILED whether it exists or not (no topic ID), one
// asked for by ID the same with the ID and no name. Auto-creation needs
// CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.
// The authorized-operations fields (v8+) are computed when asked for.
//
// Version notes:
// v1 controller id and nullable topics, v2 cluster id, v4 auto-create flag,
// v7 leader epochs, v8 authorized operations (computed with an authorizer,
// left at "omitted" without), v9 flexible, v10 topic IDs, v12 topics by
// ID, v13 top-level error.
func init() { regKey(3, 0, 13, (*Broker).handleMetadata) }

func (b *Broker) handleMetadata(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	im := b.image()
	for _, br := range im.Brokers() {
		l, ok := br.Listener(r.conn.Listener())
		if !ok {
			continue
		}
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: br.ID, Host: l.Host, Port: l.Port, Rack: br.Rack})
	}
	clusterID := im.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = im.Controller()

	az := b.authz(r)
	defer az.metadataOperations(req, resp)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		ts := b.partitions.Topics()
		sort.Slice(ts, func(i, j int) bool { return ts[i].Name() < ts[j].Name() })
		for _, t := range ts {
			if az.topicQuietly(aclOperationDescribe, t.Name()) {
				resp.Topics = append(resp.Topics, b.metadataTopic(&im, t))
			}
		}
		return resp, nil
	}
	autoCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var t *partition.Topic
		switch {
		case rt.TopicID != ([16]byte{}):
			t = b.partitions.TopicByID(rt.TopicID)
		case rt.Topic != nil:
			t = b.partitions.Topic(*rt.Topic)
		}
		if mt, denied := az.metadataDenied(rt, t, autoCreate); denied {
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if t == nil && rt.Topic != nil && autoCreate {
			t = b.autoCreate(r, *rt.Topic)
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			} else if validateTopicName(*rt.Topic) != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, b.metadataTopic(&im, t))
	}
	return resp, nil
}

// autoCreate creates a topic a client asked for by name, if the name is
// valid; a concurrent create of the same name is fine. A node that is not
// the controller asks the controller, as Kafka's brokers do, with the
// client's identity (authorized here already, and again there). The topic
// gets default.replication.factor replicas; with fewer usable brokers it
// is not created, as in Kafka.
func (b *Broker) autoCreate(r *request, name string) *partition.Topic {
	if validateTopicName(name) != nil {
		return nil
	}
	if b.forwards(createTopicsKey) {
		return b.autoCreateOnController(r, name)
	}
	t, err := b.partitions.Create(name, b.cfg.NumPartitions, nil, [16]byte{}, "",
		partition.Placement{RF: int(b.cfg.DefaultReplicationFactor)})
	if errors.Is(err, partition.ErrTopicExists) {
		return b.partitions.Topic(name)
	}
	if err != nil {
		b.log.Warn("auto-creating a topic failed", "topic", name, "err", err)
		return nil
	}
	return t
}

// createTopicsKey is CreateTopics' API key; autoCreateVersion the
// version an auto-creation asks the controller with (flexible, with
// topic ids: every kmirror serves it).
const (
	createTopicsKey   = 19
	autoCreateVersion = 7
)

// autoCreateOnController creates name through the controller (a
// CreateTopics in an Envelope, as a client's forwarded one) and returns
// the topic once it is open here, nil if it could not be created.
func (b *Broker) autoCreateOnController(r *request, name string) *partition.Topic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, b.cfg.NumPartitions, -1
	if err := b.createOnController(r.conn, r.fwd, r.hdr.CorrelationID, r.hdr.ClientID, rt); err != nil {
		if ok, held := b.warnings.allow("auto-create", time.Now()); ok {
			b.log.Warn("auto-creating a topic through the controller failed", "topic", name, "held_back", held, "err", err)
		}
		return nil
	}
	return b.partitions.Topic(name) // open here once forward waited for the entry
}

// createOnController asks the controller to create rt, a CreateTopics
// forwarded in an Envelope as from the sender that conn and fwd name
// (with its correlation id and client id), and waits until this node
// applied the controller's entry. A topic that exists already is no
// error.
func (b *Broker) createOnController(conn *netio.Conn, fwd *forwardedIdentity, corr int32, clientID []byte,
	rt kmsg.CreateTopicsRequestTopic) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = autoCreateVersion, int32(forwardTimeout.Milliseconds())
	req.Topics = append(req.Topics, rt)
	create := &request{conn: conn, fwd: fwd, kreq: req,
		hdr: &netio.Header{Key: createTopicsKey, Version: autoCreateVersion, CorrelationID: corr,
			ClientID: clientID, Flexible: true}}
	resp, err := b.forward(create, req.AppendTo(nil))
	if err != nil {
		return err
	}
	ct := resp.(*kmsg.CreateTopicsResponse)
	if len(ct.Topics) != 1 {
		return fmt.Errorf("the controller answered %d topics", len(ct.Topics))
	}
	if code := ct.Topics[0].ErrorCode; code != 0 && code != kerr.TopicAlreadyExists.Code {
		return fmt.Errorf("the controller refused it: %w", kerr.ErrorForCode(code))
	}
	return nil
}

// metadataTopic answers a topic from the image. A topic created after
// *im was loaded is in a newer image (the registry publishes one
// with each creation), which then replaces *im for the rest of the
// request.
func (b *Broker) metadataTopic(im **meta.Image, t *partition.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name()
	mt.Topic, mt.TopicID = &name, t.ID()
	mt.IsInternal = isInternalTopic(name)
	it := (*im).Topic(t.Name())
	if it == nil || it.ID != t.ID() {
		*im = b.image()
		if it = (*im).Topic(t.Name()); it == nil || it.ID != t.ID() {
			// Deleted since it was looked up.
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			return mt
		}
	}
	for i := range it.Partitions {
		ip := &it.Partitions[i]
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader, mp.LeaderEpoch = ip.Leader, ip.LeaderEpoch
		mp.Replicas, mp.ISR, mp.OfflineReplicas = ip.Replicas, ip.ISR, ip.Offline
		if mp.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// validateTopicName applies Kafka's topic name rules.
func validateTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is empty")
	case name == "." || name == "..":
		return errors.New(`topic name cannot be "." or ".."`)
	case len(name) > 249:
		return errors.New("topic name is longer than 249 characters")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return errors.New("topic name may only contain ASCII letters, digits, '.', '_' and '-'")
		}
	}
	return nil
}

// isInternalTopic reports whether name is one of the coordinators' topics,
// which Kafka marks internal (Topic.isInternal).
func isInternalTopic(name string) bool {
	return name == meta.GroupTopic || name == meta.TransactionTopic
}
