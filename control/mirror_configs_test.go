package control

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// A mirror's configs are a CLUSTER_MIRROR (64) config resource: described,
// altered incrementally (validated, stored, applied), and refused with
// INVALID_CONFIG when wrong.
func TestMirrorConfigResource(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := kfaketest.Source(t)
	n := openTestNode(t, nodetest.Config(t), nil)
	defer n.close()
	cl := n.cl
	boot := src.ListenAddrs()[0]
	n.createMirror(t, ctx, boot)

	alter := func(name, value string) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = 64, "m"
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = name, &value
		rr.Configs = append(rr.Configs, rc)
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0].ErrorCode
	}
	for _, tc := range []struct {
		name, value string
		code        int16
	}{
		{"mirror.fetch.wait.max.ms", "250", 0},
		{"mirror.fetch.wait.max.ms", "soon", kerr.InvalidConfig.Code},
		{"no.such.config", "1", kerr.InvalidConfig.Code},
		{"security.protocol", "KERBEROS", kerr.InvalidConfig.Code},
		// Valid alone, refused with the mirror's other configs: SASL
		// needs sasl.jaas.config.
		{"security.protocol", "SASL_PLAINTEXT", kerr.InvalidConfig.Code},
	} {
		if code := alter(tc.name, tc.value); code != tc.code {
			t.Errorf("alter %s=%s: code %d, want %d", tc.name, tc.value, code, tc.code)
		}
	}

	desc := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = 64, "m"
	desc.Resources = append(desc.Resources, dr)
	dresp, err := desc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range dresp.Resources[0].Configs {
		got[c.Name] = *c.Value
	}
	if got["mirror.fetch.wait.max.ms"] != "250" || got["bootstrap.servers"] != boot {
		t.Fatalf("described configs %v", got)
	}
	// With documentation asked for, each config carries its definition's
	// doc; the described type stays STRING.
	desc.IncludeDocumentation = true
	if dresp, err = desc.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for _, c := range dresp.Resources[0].Configs {
		if c.Documentation == nil || *c.Documentation == "" || c.ConfigType != kmsg.ConfigTypeString {
			t.Errorf("%s: doc %v, type %v", c.Name, c.Documentation, c.ConfigType)
		}
	}
	dr.ResourceName = "nosuch"
	desc.Resources = []kmsg.DescribeConfigsRequestResource{dr}
	if dresp, err = desc.RequestWith(ctx, cl); err != nil || dresp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("describing an unknown mirror: %v %+v", err, dresp)
	}
}
