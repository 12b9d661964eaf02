package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// On a bare node (no registered broker) this node is the one usable
// broker: a replication factor above 1, asked or from
// default.replication.factor, is refused with Kafka's message, by
// CreateTopics and by auto-creation, while 1 is created and answered.
func TestCreateTopicsReplicationFactorOnOneNode(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) { c.DefaultReplicationFactor = 2 })
	ctx := adminCtx(t)
	cl, _ := adminClient(t, b)
	for _, tc := range []struct {
		topic string
		rf    int16
		code  int16
		msg   string
	}{
		{"rf1", 1, 0, ""},
		{"rf3", 3, kerr.InvalidReplicationFactor.Code, "Unable to replicate the partition 3 time(s): The target replication factor of 3 " +
			"cannot be reached because only 1 broker(s) are registered."},
		{"default", -1, kerr.InvalidReplicationFactor.Code, "Unable to replicate the partition 2 time(s): The target replication factor of 2 " +
			"cannot be reached because only 1 broker(s) are registered."},
	} {
		for _, validate := range []bool{true, false} {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version, req.ValidateOnly = 7, validate
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.topic, 2, tc.rf
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			st := resp.Topics[0]
			var msg string
			if st.ErrorMessage != nil {
				msg = *st.ErrorMessage
			}
			if st.ErrorCode != tc.code || msg != tc.msg {
				t.Errorf("%s (validate only %v): code %d %q, want %d %q", tc.topic, validate, st.ErrorCode, msg, tc.code, tc.msg)
			}
			if tc.code == 0 && (st.ReplicationFactor != 1 || st.NumPartitions != 2) {
				t.Errorf("%s: answered rf %d, %d partitions", tc.topic, st.ReplicationFactor, st.NumPartitions)
			}
		}
		if created := b.partitions.Topic(tc.topic) != nil; created != (tc.code == 0) {
			t.Errorf("%s: created %v", tc.topic, created)
		}
	}

	// Auto-creation asks for default.replication.factor too.
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("auto")
	req.Topics, req.AllowAutoTopicCreation = append(req.Topics, mt), true
	if _, err := req.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if b.partitions.Topic("auto") != nil {
		t.Errorf("auto-created a topic of 2 replicas on one node")
	}
}
