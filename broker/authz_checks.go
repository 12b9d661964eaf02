package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/partition"
)

// The per-API authorization checks (Kafka's KafkaApis rules), called by the
// handlers through an authzCtx; the decision and the ACL cache are in
// authorizer.go.

// produceHasTxnRecords reports whether a Produce carries transactional
// batches (Kafka's RequestUtils.hasTransactionalRecords: the first batch of
// each partition tells).
func produceHasTxnRecords(req *kmsg.ProduceRequest) bool {
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			if recs := req.Topics[i].Partitions[j].Records; len(recs) >= batch.HeaderSize && batch.Batch(recs).IsTransactional() {
				return true
			}
		}
	}
	return false
}

// authzFailure returns the code and message of an authorization error for
// a response (Kafka's exception message is its own; the code is what
// clients act on).
func authzFailure(err *kerr.Error) (int16, *string) {
	msg := err.Description
	return err.Code, &msg
}

func clusterAuthorizationFailed() (int16, *string) {
	return authzFailure(kerr.ClusterAuthorizationFailed)
}

// CLUSTER_MIRROR_AUTHORIZATION_FAILED (SPEC.md section 2), which kerr does
// not know.
var (
	mirrorAuthorizationFailedCode = mirrorapi.ErrClusterMirrorAuthorizationFailed
	mirrorAuthorizationFailedMsg  = mirrorapi.ErrorMessage(mirrorapi.ErrClusterMirrorAuthorizationFailed)
)

func mirrorAuthorizationFailed() (int16, *string) {
	msg := mirrorAuthorizationFailedMsg
	return mirrorAuthorizationFailedCode, &msg
}

// produceTxnDenied reports whether a Produce fails whole with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED: it carries transactional batches
// and either names no transactional id or lacks WRITE on it.
func (c *authzCtx) produceTxnDenied(req *kmsg.ProduceRequest) bool {
	if !c.on() || !produceHasTxnRecords(req) {
		return false
	}
	return req.TransactionID == nil || !c.transactionalID(aclOperationWrite, *req.TransactionID)
}

// produceTopicDenied reports whether a Produce topic lacks WRITE. A topic
// named by an unknown ID (v13+) is not asked about: it answers
// UNKNOWN_TOPIC_ID, as in Kafka.
func (c *authzCtx) produceTopicDenied(version int16, name string, t *partition.Topic) bool {
	if !c.on() {
		return false
	}
	if version >= 13 {
		if t == nil {
			return false
		}
		name = t.Name()
	}
	return !c.topic(aclOperationWrite, name)
}

// authorizeFetch marks the partitions of a Fetch its sender may not read
// (fetchPart.denied). One decision per run of partitions of one topic;
// nothing allocates.
func (b *Broker) authorizeFetch(r *request, req *kmsg.FetchRequest, fs *fetchScratch) {
	az := b.authz(r)
	if !az.on() {
		return
	}
	if req.ReplicaID >= 0 || (req.Version >= 15 && req.ReplicaState.ID >= 0) {
		denied := !az.cluster(aclOperationClusterAction)
		for i := range fs.parts {
			fs.parts[i].denied = denied
		}
		return
	}
	last, denied := -1, false
	for i := range fs.parts {
		fp := &fs.parts[i]
		if fp.topicIdx != last {
			last = fp.topicIdx
			switch {
			case fp.t != nil:
				denied = !az.topic(aclOperationRead, fp.t.Name())
			case fs.topics[fp.topicIdx].name != "":
				denied = !az.topic(aclOperationRead, fs.topics[fp.topicIdx].name)
			default:
				denied = false // an unknown topic ID: UNKNOWN_TOPIC_ID
			}
		}
		fp.denied = denied
	}
}

// metadataDenied answers a topic of a Metadata request its sender may not
// see or auto-create: TOPIC_AUTHORIZATION_FAILED without DESCRIBE (by name
// with the name and no ID, by ID with the ID and no name, as Kafka, which
// holds IDs not sensitive), and for a missing topic that would be
// auto-created without CREATE on the cluster or the topic. t is the topic
// found, nil for none.
func (c *authzCtx) metadataDenied(rt kmsg.MetadataRequestTopic, t *partition.Topic, autoCreate bool) (kmsg.MetadataResponseTopic, bool) {
	mt := kmsg.NewMetadataResponseTopic()
	if !c.on() {
		return mt, false
	}
	mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
	switch {
	case t != nil:
		if c.topic(aclOperationDescribe, t.Name()) {
			return mt, false
		}
		if rt.TopicID != ([16]byte{}) {
			mt.TopicID = t.ID()
		} else {
			mt.Topic = rt.Topic
		}
		return mt, true
	case rt.Topic == nil:
		return mt, false // an unknown ID: UNKNOWN_TOPIC_ID
	}
	mt.Topic = rt.Topic
	name := *rt.Topic
	if !c.topic(aclOperationDescribe, name) {
		return mt, true
	}
	if autoCreate && !c.clusterQuietly(aclOperationCreate) && !c.topic(aclOperationCreate, name) {
		return mt, true
	}
	return mt, false
}

// metadataOperations fills the authorized-operations fields a Metadata
// request asks for (v8+): the cluster's (v8-10) when the sender may
// DESCRIBE it, else 0, and each answered topic's.
func (c *authzCtx) metadataOperations(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if !c.on() || req.Version < 8 {
		return
	}
	if req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if c.cluster(aclOperationDescribe) {
			resp.AuthorizedOperations = c.operations(aclResourceCluster, clusterResourceName, clusterOperationsList)
		}
	}
	if req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			if mt := &resp.Topics[i]; mt.ErrorCode == 0 && mt.Topic != nil {
				mt.AuthorizedOperations = c.operations(aclResourceTopic, *mt.Topic, topicOperations)
			}
		}
	}
}

// createTopicDenied answers a CreateTopics topic its sender may not create
// (no CREATE on the cluster, createAll, nor on the topic). A duplicate
// name and __cluster_metadata keep their INVALID_REQUEST, which Kafka
// answers first.
func (c *authzCtx) createTopicDenied(rt *kmsg.CreateTopicsRequestTopic, duplicate, createAll bool) (topicCreation, bool) {
	tc := topicCreation{name: rt.Topic}
	// A node asks the controller for __consumer_offsets as itself (its
	// inter-broker principal, which holds CLUSTER_ACTION as the
	// Envelope requires): the topic is the cluster's, as in Kafka.
	internal := rt.Topic == meta.GroupTopic && c.clusterQuietly(aclOperationClusterAction)
	if !c.on() || createAll || duplicate || internal || rt.Topic == clusterMetadataTopic || c.topic(aclOperationCreate, rt.Topic) {
		return tc, false
	}
	tc.fail(kerr.TopicAuthorizationFailed, "Authorization failed.")
	return tc, true
}

// deleteTopicsDenied applies DeleteTopics' authorization to the resolved
// entries, as Kafka's controller does: without DELETE on the cluster, a
// found topic needs DELETE on itself, else TOPIC_AUTHORIZATION_FAILED (by
// name without its ID; by ID without its name unless the sender may
// DESCRIBE it), and a missing name the sender may not DESCRIBE answers
// TOPIC_AUTHORIZATION_FAILED rather than UNKNOWN_TOPIC_OR_PARTITION.
func (c *authzCtx) deleteTopicsDenied(dels []topicDeletion) {
	if !c.on() || c.clusterQuietly(aclOperationDelete) {
		return
	}
	for i := range dels {
		d := &dels[i]
		switch {
		case d.t != nil:
			if c.topic(aclOperationDelete, d.t.Name()) {
				continue
			}
			d.err, d.msg = kerr.TopicAuthorizationFailed, ""
			if !d.byID {
				d.id = [16]byte{}
			} else if !c.topicQuietly(aclOperationDescribe, d.t.Name()) {
				d.name = nil
			}
		case d.err == kerr.UnknownTopicOrPartition && d.name != nil:
			if !c.topic(aclOperationDescribe, *d.name) {
				d.err = kerr.TopicAuthorizationFailed
			}
		}
	}
}

// clusterOperations is the cluster's authorized-operations bit field for
// DescribeCluster: the sender's operations if it may DESCRIBE the
// cluster, else 0. REQUIRES: c.on().
func (c *authzCtx) clusterOperations() int32 {
	if !c.cluster(aclOperationDescribe) {
		return 0
	}
	return c.operations(aclResourceCluster, clusterResourceName, clusterOperationsList)
}

// initProducerIDDenied returns InitProducerId's authorization error code,
// or 0. REQUIRES: c.on().
func (c *authzCtx) initProducerIDDenied(req *kmsg.InitProducerIDRequest) int16 {
	if req.TransactionalID != nil {
		if c.transactionalID(aclOperationWrite, *req.TransactionalID) {
			return 0
		}
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	if c.clusterQuietly(aclOperationIdempotentWrite) || c.anyResource(aclOperationWrite, aclResourceTopic) {
		return 0
	}
	c.a.logDenial(c.b, c.r, c.principal, c.host, aclOperationIdempotentWrite, aclResourceCluster, clusterResourceName)
	return kerr.ClusterAuthorizationFailed.Code
}

// configDenied checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
// resource, with Kafka's mapping of config resources to ACL resources and
// errors (ConfigHelper, ControllerApis.authorizeAlterResource): TOPIC on
// the topic, BROKER, BROKER_LOGGER and CLIENT_METRICS on the cluster,
// GROUP on the group, CLUSTER_MIRROR on the mirror. Other types are not
// checked: they answer INVALID_REQUEST anyway.
func (c *authzCtx) configDenied(op int8, typ kmsg.ConfigResourceType, name string) *configError {
	if !c.on() {
		return nil
	}
	var err *kerr.Error
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if c.topic(op, name) {
			return nil
		}
		err = kerr.TopicAuthorizationFailed
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if c.cluster(op) {
			return nil
		}
		err = kerr.ClusterAuthorizationFailed
	case kmsg.ConfigResourceTypeGroupConfig:
		if c.group(op, name) {
			return nil
		}
		err = kerr.GroupAuthorizationFailed
	case configResourceClusterMirror:
		if c.mirror(op, name) {
			return nil
		}
		return &configError{code: mirrorAuthorizationFailedCode, msg: mirrorAuthorizationFailedMsg}
	default:
		return nil
	}
	return &configError{code: err.Code, msg: err.Description}
}

// coordinatorDenied returns FindCoordinator's authorization error for one
// key, or nil: DESCRIBE on the group or on the transactional id.
func (c *authzCtx) coordinatorDenied(typ int8, key string) *kerr.Error {
	switch {
	case !c.on():
	case typ == coordinatorGroup && !c.group(aclOperationDescribe, key):
		return kerr.GroupAuthorizationFailed
	case typ == coordinatorTransaction && !c.transactionalID(aclOperationDescribe, key):
		return kerr.TransactionalIDAuthorizationFailed
	}
	return nil
}

// offsetCommitDenied applies OffsetCommit's authorization: READ on the
// group, else every partition answers GROUP_AUTHORIZATION_FAILED; then
// READ on each topic, else its partitions answer
// TOPIC_AUTHORIZATION_FAILED. It removes the refused topics from req and
// returns their answers; skip means the coordinator has nothing left to
// do (the group is refused, or every topic is).
func (c *authzCtx) offsetCommitDenied(req *kmsg.OffsetCommitRequest) (denied []kmsg.OffsetCommitResponseTopic, skip bool) {
	if !c.on() {
		return nil, false
	}
	if !c.group(aclOperationRead, req.Group) {
		return offsetCommitErrors(req.Topics, kerr.GroupAuthorizationFailed.Code), true
	}
	kept, refused := splitAllowed(req.Topics, func(rt *kmsg.OffsetCommitRequestTopic) bool {
		return c.topic(aclOperationRead, rt.Topic)
	})
	denied = offsetCommitErrors(refused, kerr.TopicAuthorizationFailed.Code)
	req.Topics = kept
	return denied, len(kept) == 0 && len(denied) > 0
}

// offsetFetch answers an OffsetFetch with authorization: DESCRIBE on each
// group, else GROUP_AUTHORIZATION_FAILED for it (top-level before v8, and
// on every requested partition for v1, which has no top-level code); then
// DESCRIBE on each requested topic, else its partitions answer
// TOPIC_AUTHORIZATION_FAILED with offset -1, and, when every offset is
// asked for, the topics without DESCRIBE are left out. REQUIRES: c.on().
func (b *Broker) offsetFetch(c *authzCtx, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	if req.Version < 8 {
		if !c.group(aclOperationDescribe, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			if req.Version < 2 {
				resp.Topics = offsetFetchErrors(req.Topics, kerr.GroupAuthorizationFailed.Code)
			}
			return resp
		}
		var denied []kmsg.OffsetFetchRequestTopic
		if req.Topics != nil {
			req.Topics, denied = splitAllowed(req.Topics, func(t *kmsg.OffsetFetchRequestTopic) bool {
				return c.topic(aclOperationDescribe, t.Topic)
			})
		}
		resp := b.groups.OffsetFetch(req)
		if req.Topics == nil {
			resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
				return !c.topic(aclOperationDescribe, t.Topic)
			})
		}
		resp.Topics = append(resp.Topics, offsetFetchErrors(denied, kerr.TopicAuthorizationFailed.Code)...)
		return resp
	}

	type groupPlan struct {
		denied       bool
		all          bool
		deniedTopics []kmsg.OffsetFetchRequestGroupTopic
	}
	plans := make([]groupPlan, len(req.Groups))
	kept := make([]kmsg.OffsetFetchRequestGroup, 0, len(req.Groups))
	for i, rg := range req.Groups {
		p := &plans[i]
		if !c.group(aclOperationDescribe, rg.Group) {
			p.denied = true
			continue
		}
		p.all = rg.Topics == nil
		if !p.all {
			rg.Topics, p.deniedTopics = splitAllowed(rg.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) bool {
				return c.topic(aclOperationDescribe, t.Topic)
			})
		}
		kept = append(kept, rg)
	}
	all := req.Groups
	req.Groups = kept
	coord := b.groups.OffsetFetch(req)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	j := 0
	for i, rg := range all {
		p := &plans[i]
		if p.denied {
			og := kmsg.NewOffsetFetchResponseGroup()
			og.Group, og.ErrorCode = rg.Group, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, og)
			continue
		}
		og := coord.Groups[j]
		j++
		if p.all {
			og.Topics = slices.DeleteFunc(og.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool {
				return !c.topic(aclOperationDescribe, t.Topic)
			})
		}
		for _, t := range p.deniedTopics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			og.Topics = append(og.Topics, rt)
		}
		resp.Groups = append(resp.Groups, og)
	}
	return resp
}

// offsetFetchErrors answers the partitions of topics (OffsetFetch before
// v8) with code and offset -1.
func offsetFetchErrors(topics []kmsg.OffsetFetchRequestTopic, code int16) []kmsg.OffsetFetchResponseTopic {
	var out []kmsg.OffsetFetchResponseTopic
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

// splitAllowed splits a request's entries into those allowed (a new,
// non-nil slice: nil would mean "every topic" to OffsetFetch) and the
// others.
func splitAllowed[T any](topics []T, allowed func(*T) bool) (yes, no []T) {
	yes = make([]T, 0, len(topics))
	for i := range topics {
		if allowed(&topics[i]) {
			yes = append(yes, topics[i])
		} else {
			no = append(no, topics[i])
		}
	}
	return yes, no
}

// describeGroups answers a DescribeGroups with authorization: DESCRIBE on
// each group, else an entry with GROUP_AUTHORIZATION_FAILED and nothing
// else, in request order; with IncludeAuthorizedOperations (v3+) each
// described group carries the sender's operations on it. REQUIRES: c.on().
func (b *Broker) describeGroups(c *authzCtx, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	all := req.Groups
	req.Groups, _ = splitAllowed(all, func(g *string) bool { return c.group(aclOperationDescribe, *g) })
	var coord *kmsg.DescribeGroupsResponse
	if len(req.Groups) > 0 {
		coord = b.groups.DescribeGroups(req)
	}
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	j := 0
	for _, name := range all {
		if j < len(req.Groups) && req.Groups[j] == name {
			dg := coord.Groups[j]
			j++
			if req.IncludeAuthorizedOperations {
				dg.AuthorizedOperations = authorizedOperationsOmitted
				if dg.ErrorCode == 0 {
					dg.AuthorizedOperations = c.operations(aclResourceGroup, name, groupOperations)
				}
			}
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group, dg.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// listGroupsFilter applies ListGroups' authorization: DESCRIBE on the
// cluster lists every group; otherwise only the groups the sender may
// DESCRIBE are listed, silently.
func (c *authzCtx) listGroupsFilter(resp *kmsg.ListGroupsResponse) {
	if !c.on() || c.clusterQuietly(aclOperationDescribe) {
		return
	}
	resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
		return !c.groupQuietly(aclOperationDescribe, g.Group)
	})
}

// deleteGroups answers a DeleteGroups with authorization: DELETE on each
// group, else GROUP_AUTHORIZATION_FAILED for it, in request order.
// REQUIRES: c.on().
func (b *Broker) deleteGroups(c *authzCtx, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	all := req.Groups
	req.Groups, _ = splitAllowed(all, func(g *string) bool { return c.group(aclOperationDelete, *g) })
	var coord *kmsg.DeleteGroupsResponse
	if len(req.Groups) > 0 {
		coord = b.groups.DeleteGroups(req)
	}
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	j := 0
	for _, name := range all {
		if j < len(req.Groups) && req.Groups[j] == name {
			resp.Groups = append(resp.Groups, coord.Groups[j])
			j++
			continue
		}
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// offsetDelete answers an OffsetDelete with authorization: DELETE on the
// group, else a top-level GROUP_AUTHORIZATION_FAILED; then READ on each
// topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED.
// REQUIRES: c.on().
func (b *Broker) offsetDelete(c *authzCtx, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	if !c.group(aclOperationDelete, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	}
	var denied []kmsg.OffsetDeleteRequestTopic
	req.Topics, denied = splitAllowed(req.Topics, func(t *kmsg.OffsetDeleteRequestTopic) bool {
		return c.topic(aclOperationRead, t.Topic)
	})
	resp := b.groups.OffsetDelete(req)
	if resp.ErrorCode != 0 {
		return resp
	}
	for _, t := range denied {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// transactionalID checks op on a transactional id.
func (c *authzCtx) transactionalID(op int8, id string) bool {
	return c.check(op, aclResourceTransactionalID, id, true)
}

// The transaction APIs (Kafka's rules, KafkaApis): WRITE on the
// transactional id for AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
// TxnOffsetCommit; READ on the group for AddOffsetsToTxn and
// TxnOffsetCommit; WRITE on each topic added to a transaction, READ on
// each topic whose offsets it commits.

// addPartitionsToTxnDenied returns AddPartitionsToTxn's answer when
// authorization refuses it, else nil: without WRITE on the transactional
// id every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a
// topic without WRITE answers TOPIC_AUTHORIZATION_FAILED, a missing one
// UNKNOWN_TOPIC_OR_PARTITION, and then the others OPERATION_NOT_ATTEMPTED
// (nothing is added).
func (b *Broker) addPartitionsToTxnDenied(c *authzCtx, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	if !c.on() {
		return nil
	}
	idDenied := !c.transactionalID(aclOperationWrite, req.TransactionalID)
	codes := make([]int16, len(req.Topics))
	failed := idDenied
	for i, rt := range req.Topics {
		switch {
		case idDenied:
			codes[i] = kerr.TransactionalIDAuthorizationFailed.Code
		case !c.topic(aclOperationWrite, rt.Topic):
			codes[i], failed = kerr.TopicAuthorizationFailed.Code, true
		}
	}
	if !failed {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for i, rt := range req.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		t := b.partitions.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, codes[i]
			if sp.ErrorCode == 0 {
				sp.ErrorCode = kerr.OperationNotAttempted.Code
				if t == nil || p < 0 || int(p) >= len(t.Partitions()) {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// addOffsetsToTxnDenied returns AddOffsetsToTxn's authorization error code,
// or 0: WRITE on the transactional id, then READ on the group.
func (c *authzCtx) addOffsetsToTxnDenied(req *kmsg.AddOffsetsToTxnRequest) int16 {
	switch {
	case !c.on():
	case !c.transactionalID(aclOperationWrite, req.TransactionalID):
		return kerr.TransactionalIDAuthorizationFailed.Code
	case !c.group(aclOperationRead, req.Group):
		return kerr.GroupAuthorizationFailed.Code
	}
	return 0
}

// endTxnDenied returns EndTxn's authorization error code, or 0: WRITE on
// the transactional id.
func (c *authzCtx) endTxnDenied(req *kmsg.EndTxnRequest) int16 {
	if c.on() && !c.transactionalID(aclOperationWrite, req.TransactionalID) {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	return 0
}

// txnOffsetCommitDenied applies TxnOffsetCommit's authorization: WRITE on
// the transactional id, else every partition answers
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else
// GROUP_AUTHORIZATION_FAILED; then READ on each topic, else its partitions
// answer TOPIC_AUTHORIZATION_FAILED. It removes the refused topics from
// req and returns their answers; skip means nothing is left to commit.
func (c *authzCtx) txnOffsetCommitDenied(req *kmsg.TxnOffsetCommitRequest) (denied []kmsg.TxnOffsetCommitResponseTopic, skip bool) {
	if !c.on() {
		return nil, false
	}
	var all int16
	switch {
	case !c.transactionalID(aclOperationWrite, req.TransactionalID):
		all = kerr.TransactionalIDAuthorizationFailed.Code
	case !c.group(aclOperationRead, req.Group):
		all = kerr.GroupAuthorizationFailed.Code
	}
	if all != 0 {
		return txnOffsetCommitErrors(req.Topics, all), true
	}
	kept, refused := splitAllowed(req.Topics, func(rt *kmsg.TxnOffsetCommitRequestTopic) bool {
		return c.topic(aclOperationRead, rt.Topic)
	})
	denied = txnOffsetCommitErrors(refused, kerr.TopicAuthorizationFailed.Code)
	req.Topics = kept
	return denied, len(kept) == 0 && len(denied) > 0
}

// describeTransactionDenied applies DescribeTransactions' authorization to
// one transactional id, before it is looked up: without DESCRIBE on it,
// st answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED and denied is true.
func (c *authzCtx) describeTransactionDenied(st *kmsg.DescribeTransactionsResponseTransactionState) (denied bool) {
	if !c.on() || c.transactionalID(aclOperationDescribe, st.TransactionalID) {
		return false
	}
	st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	return true
}

// describeTransactionTopics leaves out of a described transaction the
// topics the sender may not DESCRIBE, as Kafka does.
func (c *authzCtx) describeTransactionTopics(st *kmsg.DescribeTransactionsResponseTransactionState) {
	if !c.on() {
		return
	}
	st.Topics = slices.DeleteFunc(st.Topics, func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) bool {
		return !c.topicQuietly(aclOperationDescribe, t.Topic)
	})
}

// listTransactionsFilter leaves out of a ListTransactions answer the
// transactional ids the sender may not DESCRIBE, silently.
func (c *authzCtx) listTransactionsFilter(resp *kmsg.ListTransactionsResponse) {
	if !c.on() {
		return
	}
	resp.TransactionStates = slices.DeleteFunc(resp.TransactionStates, func(ts kmsg.ListTransactionsResponseTransactionState) bool {
		return !c.check(aclOperationDescribe, aclResourceTransactionalID, ts.TransactionalID, false)
	})
}
