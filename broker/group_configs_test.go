package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The GROUP resource (kafka-configs --entity-type groups): a group's own
// heartbeat interval and session timeout are checked against Kafka's
// bounds, described over the broker's, reach the group's members, and go
// back to the broker's when deleted. A group needs no members to have
// them.
func TestGroupConfigs(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cfgTopic(t, b, "orders", 2, nil)
	cl, _ := cfgAdmin(t, b)
	alter := func(op kmsg.IncrementalAlterConfigOp, name, value string) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "payments"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, op, &value
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		res := rawRequest(t, cl, b, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		msg := ""
		if res.ErrorMessage != nil {
			msg = *res.ErrorMessage
		}
		return res.ErrorCode, msg
	}
	describe := func() map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "payments"
		req.Resources = append(req.Resources, rr)
		res := rawRequest(t, cl, b, req).(*kmsg.DescribeConfigsResponse).Resources[0]
		wantCode(t, "DescribeConfigs GROUP", res.ErrorCode, 0)
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range res.Configs {
			out[c.Name] = c
		}
		return out
	}
	joinInterval := func(member string) int32 {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.RebalanceTimeoutMillis, req.SubscribedTopicNames = "payments", member, 30000, []string{"orders"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp := rawRequest(t, cl, b, req).(*kmsg.ConsumerGroupHeartbeatResponse)
		wantCode(t, "ConsumerGroupHeartbeat", resp.ErrorCode, 0)
		return resp.HeartbeatIntervalMillis
	}

	if d := describe()["consumer.heartbeat.interval.ms"]; d.Value == nil || *d.Value != "5000" || d.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("the default heartbeat interval described: %+v", d)
	}
	if d := describe()["share.auto.offset.reset"]; d.Value == nil || *d.Value != "latest" || d.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("the default share.auto.offset.reset described: %+v", d)
	}
	if code, msg := alter(kmsg.IncrementalAlterConfigOpSet, "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("setting share.auto.offset.reset: %s (%s)", errName(code), msg)
	}
	if d := describe()["share.auto.offset.reset"]; d.Value == nil || *d.Value != "earliest" || d.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("the group's share.auto.offset.reset described: %+v", d)
	}
	if got := b.shareAutoOffsetReset("payments"); got != "earliest" {
		t.Fatalf("share partitions of the group start at %s, want earliest", got)
	}
	for _, bad := range []struct{ name, value string }{
		{"consumer.heartbeat.interval.ms", "100"},
		{"consumer.session.timeout.ms", "90000"},
		{"consumer.session.timeout.ms", "soon"},
		{"share.record.lock.duration.ms", "1000"},
		{"share.auto.offset.reset", "by_duration:PT1H"},
		{"no.such.group.config", "1"},
	} {
		if code, msg := alter(kmsg.IncrementalAlterConfigOpSet, bad.name, bad.value); code != kerr.InvalidConfig.Code {
			t.Fatalf("setting %s=%s: %s (%s), want INVALID_CONFIG", bad.name, bad.value, errName(code), msg)
		}
	}
	if code, msg := alter(kmsg.IncrementalAlterConfigOpSet, "consumer.heartbeat.interval.ms", "6000"); code != 0 {
		t.Fatalf("setting the heartbeat interval: %s (%s)", errName(code), msg)
	}
	if d := describe()["consumer.heartbeat.interval.ms"]; d.Value == nil || *d.Value != "6000" || d.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("the group's heartbeat interval described: %+v", d)
	}
	if got := joinInterval("m1"); got != 6000 {
		t.Fatalf("a member was told to heartbeat every %d ms, want the group's 6000", got)
	}
	if code, msg := alter(kmsg.IncrementalAlterConfigOpDelete, "consumer.heartbeat.interval.ms", ""); code != 0 {
		t.Fatalf("deleting the heartbeat interval: %s (%s)", errName(code), msg)
	}
	if got := joinInterval("m2"); got != 5000 {
		t.Fatalf("after the delete a member was told %d ms, want the broker's 5000", got)
	}
}
