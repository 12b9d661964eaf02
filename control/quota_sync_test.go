package control

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

func alterQuotas(t *testing.T, f *syncFixture, adm *kadm.Client, user string, key string, value float64, remove bool) {
	t.Helper()
	name := user
	res, err := adm.AlterClientQuotas(f.ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: key, Value: value, Remove: remove}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("altering %s's %s: %v %s", user, key, r.Err, r.ErrMessage)
		}
	}
}

// userQuotas is this node's quotas of user, as DescribeClientQuotas tells.
func userQuotas(t *testing.T, f *syncFixture, user string) map[string]float64 {
	t.Helper()
	described, err := kadm.NewClient(f.n.cl).DescribeClientQuotas(f.ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, d := range described {
		if len(d.Entity) == 1 && d.Entity[0].Type == "user" && d.Entity[0].Name != nil && *d.Entity[0].Name == user {
			for _, v := range d.Values {
				out[v.Key] = v.Value
			}
		}
	}
	return out
}

// The sync copies the source's client quotas and follows them, never
// touches quotas set here by hand, stops at failover, and can be turned
// off (issue 17 item 6: a DR target needs the primary's quotas).
func TestSyncClientQuotas(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t, "t")
	local := kadm.NewClient(f.n.cl)
	alterQuotas(t, f, f.sadm, "alice", "producer_byte_rate", 1024, false)
	alterQuotas(t, f, f.sadm, "bob", "producer_byte_rate", 900, false)
	alterQuotas(t, f, local, "bob", "producer_byte_rate", 500, false) // the operator's, here
	f.n.startTopics(t, f.ctx, "t")
	f.n.ctl.SyncOnce()
	if got := userQuotas(t, f, "alice"); got["producer_byte_rate"] != 1024 {
		t.Fatalf("alice after a sync: %v, want the source's producer_byte_rate 1024", got)
	}
	if got := userQuotas(t, f, "bob"); got["producer_byte_rate"] != 500 {
		t.Fatalf("bob after a sync: %v, want the quota set here (500) kept", got)
	}
	if errs := f.syncErrors(t); errs[SyncClientQuotas] != 0 {
		t.Fatalf("sync errors %v", errs)
	}

	alterQuotas(t, f, f.sadm, "alice", "producer_byte_rate", 2048, false)
	alterQuotas(t, f, local, "alice", "consumer_byte_rate", 77, false)
	f.n.ctl.SyncOnce()
	if got := userQuotas(t, f, "alice"); got["producer_byte_rate"] != 2048 || got["consumer_byte_rate"] != 77 {
		t.Fatalf("alice after the source changed: %v, want 2048 from the source and 77 set here", got)
	}
	alterQuotas(t, f, f.sadm, "alice", "producer_byte_rate", 0, true)
	f.n.ctl.SyncOnce()
	if got := userQuotas(t, f, "alice"); len(got) != 1 || got["consumer_byte_rate"] != 77 {
		t.Fatalf("alice after the source removed its quota: %v, want only the 77 set here", got)
	}
	if rec, err := f.n.b.Store().SyncedQuotas("m"); err != nil || len(rec) != 0 {
		t.Fatalf("the sync's record after the removal: %v %v", rec, err)
	}

	// Turned off: nothing follows.
	f.setMirrorConfigs(t, quotaSyncConfig, "false")
	alterQuotas(t, f, f.sadm, "carol", "request_percentage", 20, false)
	f.n.ctl.SyncOnce()
	if got := userQuotas(t, f, "carol"); len(got) != 0 {
		t.Fatalf("carol with the sync off: %v", got)
	}
	f.setMirrorConfigs(t)
	f.n.ctl.SyncOnce()
	if got := userQuotas(t, f, "carol"); got["request_percentage"] != 20 {
		t.Fatalf("carol with the sync on again: %v", got)
	}

	// Failed over: the quotas are the operator's from then on.
	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName, stop.Topics = "m", []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "t"}}
	if _, err := f.n.cl.Request(f.ctx, stop); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 STOPPED", func() bool { return f.state(t, "t", 0).State == state.StateStopped }))
	alterQuotas(t, f, f.sadm, "carol", "request_percentage", 0, true)
	f.n.ctl.SyncOnce()
	if got := userQuotas(t, f, "carol"); got["request_percentage"] != 20 {
		t.Fatalf("carol after the failover: %v, want the quota kept", got)
	}
}
