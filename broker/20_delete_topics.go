package broker

import (
	"github.com/kmirror/kmirror/partition"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v1-6
//
// Behavior:
// Topics are named by name (v1-5) or, from v6, each by name or by topic
// ID. As in Kafka's controller: an entry with neither or both is
// INVALID_REQUEST, a name or ID given twice is INVALID_REQUEST (one answer
// for it), an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown ID
// UNKNOWN_TOPIC_ID, and a name and an ID of the same topic in one request
// are INVALID_REQUEST for both. A deleted topic leaves the registry at
// once; its partition directories are renamed aside and removed in the
// background, so the name can be created again at once, with a new topic
// ID and empty logs. Mirror topics may be deleted (SPEC.md: only appends
// are refused). An internal topic (__consumer_offsets,
// __transaction_state) answers INVALID_TOPIC_EXCEPTION, after
// authorization: it holds every group's offsets or every transaction's
// state (kafka-topics.sh refuses it on the client side; kmirror's broker
// refuses it for every client).
//
// Authorization: DELETE on the cluster allows every topic; otherwise each
// topic needs DELETE on itself, else TOPIC_AUTHORIZATION_FAILED, checked
// before anything but the form of the entry: a name the sender may not
// DESCRIBE answers TOPIC_AUTHORIZATION_FAILED whether the topic exists or
// not (and without its topic ID), and a refused entry given by ID carries
// the topic's name only if the sender may DESCRIBE it.
//
// One node differs from Kafka: deletion is synchronous, so TimeoutMillis
// is ignored; answers keep the request's order where Kafka shuffles them.
//
// Version notes:
// v1 is the floor (Kafka 4.0); v4 flexible; v5 error messages; v6 topics
// by ID, and answers carry the topic ID.
func init() { regKey(20, 1, 6, (*Broker).handleDeleteTopics) }

// topicDeletion is one entry of a DeleteTopics request once resolved.
type topicDeletion struct {
	name *string
	id   [16]byte
	byID bool // the entry named the topic by ID
	t    *partition.Topic
	err  *kerr.Error
	msg  string
}

func (b *Broker) handleDeleteTopics(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)

	refs := req.Topics
	if req.Version < 6 {
		refs = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i := range req.TopicNames {
			refs[i].Topic = &req.TopicNames[i]
		}
	}

	az := b.authz(r)
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	dels := b.resolveTopicDeletions(refs)
	az.deleteTopicsDenied(dels)
	for i := range dels {
		d := &dels[i]
		if d.err == nil && isInternalTopic(d.t.Name()) {
			d.err, d.msg = kerr.InvalidTopicException, "Topic "+d.t.Name()+" is an internal topic and is not allowed "+
				"to be deleted: every group's committed offsets or every transaction's state is in it."
		}
		if d.err == nil {
			if err := b.deleteTopic(d.t); err != nil {
				b.log.Warn("deleting a topic failed", "topic", d.t.Name(), "err", err)
				d.err, d.msg = metadataWriteError(err), err.Error()
			}
		}
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = d.name, d.id
		if d.err != nil {
			st.ErrorCode = d.err.Code
			if d.msg != "" {
				st.ErrorMessage = &d.msg
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// resolveTopicDeletions checks the entries and finds their topics, one
// result per distinct name or ID, in request order.
func (b *Broker) resolveTopicDeletions(refs []kmsg.DeleteTopicsRequestTopic) []topicDeletion {
	var zero [16]byte
	names := make(map[string]int, len(refs))
	ids := make(map[[16]byte]int, len(refs))
	for _, ref := range refs {
		switch {
		case ref.Topic != nil && ref.TopicID == zero:
			names[*ref.Topic]++
		case ref.Topic == nil && ref.TopicID != zero:
			ids[ref.TopicID]++
		}
	}
	out := make([]topicDeletion, 0, len(refs))
	targets := make(map[*partition.Topic]int, len(refs)) // entries per topic
	for _, ref := range refs {
		d := topicDeletion{name: ref.Topic, id: ref.TopicID, byID: ref.Topic == nil}
		switch {
		case ref.Topic == nil && ref.TopicID == zero:
			d.err, d.msg = kerr.InvalidRequest, "Neither topic name nor id were specified."
		case ref.Topic != nil && ref.TopicID != zero:
			d.err, d.msg = kerr.InvalidRequest, "You may not specify both topic name and topic id."
		case ref.Topic != nil:
			n := names[*ref.Topic]
			if n == 0 {
				continue // a duplicate already answered
			}
			names[*ref.Topic] = 0
			if n > 1 {
				d.err, d.msg = kerr.InvalidRequest, "Duplicate topic name."
			} else if d.t = b.partitions.Topic(*ref.Topic); d.t == nil {
				d.err = kerr.UnknownTopicOrPartition
			}
		default:
			n := ids[ref.TopicID]
			if n == 0 {
				continue
			}
			ids[ref.TopicID] = 0
			if n > 1 {
				d.err, d.msg = kerr.InvalidRequest, "Duplicate topic id."
			} else if d.t = b.partitions.TopicByID(ref.TopicID); d.t == nil {
				d.err = kerr.UnknownTopicID
			}
		}
		if d.err == nil {
			name := d.t.Name()
			d.name, d.id = &name, d.t.ID()
			targets[d.t]++
		}
		out = append(out, d)
	}
	for i := range out {
		if d := &out[i]; d.err == nil && targets[d.t] > 1 {
			d.err, d.msg = kerr.InvalidRequest, "The provided topic name maps to an ID that was already supplied."
		}
	}
	return out
}
