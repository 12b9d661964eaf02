package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/bufpool"
	"github.com/kmirror/kmirror/netio"
	"github.com/kmirror/kmirror/state"
)

// BenchmarkServeQuotas serves a small request (Metadata without topics,
// so the quota work is not hidden behind a disk write) through Serve:
// with no quota set (the fast path: one atomic load), with a quota that
// does not match the client (the precedence lookups), and with one that
// matches but is never exceeded (lookups and the rate sensor).
func BenchmarkServeQuotas(b *testing.B) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{}
	body := req.AppendTo(nil)
	hdr := &netio.Header{Key: 3, Version: 12, Flexible: true, ClientID: []byte("bench")}
	for _, tc := range []struct {
		name  string
		quota *state.ClientQuota
	}{
		{"quotas=none", nil},
		{"quotas=other-user", &state.ClientQuota{Entity: state.QuotaEntity{User: named("someone-else")},
			Values: map[string]float64{quotaKeyProducerByteRate: 1024}}},
		{"quotas=matched", &state.ClientQuota{Entity: state.QuotaEntity{User: defaultName},
			Values: map[string]float64{quotaKeyRequestPercentage: 1e9}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			br := newTestBroker(b)
			if tc.quota != nil {
				br.quotas.set(tc.quota.Entity, tc.quota.Values)
			}
			conn := &netio.Conn{}
			serve := func() {
				out, _, err := br.Serve(conn, hdr, body, bufpool.Get(4096)[:9])
				if err != nil {
					b.Fatal(err)
				}
				bufpool.Put(out)
			}
			serve()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				serve()
			}
		})
	}
}
