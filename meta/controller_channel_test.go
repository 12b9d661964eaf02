package meta

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A request whose answer takes longer than the channel's read timeout is
// sent once and fails: it was delivered and may be being served, and a
// second copy would be served too. The channel used to take the timeout
// for a broken connection and send the request again, so a forwarded
// stop that took 11 s to answer ran twice, and its caller got the
// second one's "stopped already" instead of the first one's report.
func TestControllerChannelSendsASlowRequestOnce(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var served atomic.Int32
	c.ControlKey(int16(kmsg.CreateTopics), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		served.Add(1)
		wake := make(chan struct{})
		time.AfterFunc(time.Second, func() { close(wake) })
		c.SleepControl(func() { <-wake })
		return nil, nil, false // then kfake serves it
	})
	ch := NewControllerChannel([]Voter{{ID: 0, Addr: c.ListenAddrs()[0]}}, func() (int32, bool) { return 0, true })
	ch.readTimeout = 200 * time.Millisecond
	t.Cleanup(ch.Close)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 0 // kgo waits overhead plus a request's own timeout
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1
	req.Topics = append(req.Topics, rt)
	_, err = ch.Request(ctx, req)
	t.Logf("err: %v", err)
	if err == nil {
		t.Fatal("a request answered after the read timeout succeeded")
	}
	time.Sleep(1500 * time.Millisecond) // any resend would have arrived by now
	if n := served.Load(); n != 1 {
		t.Fatalf("the controller was sent the request %d times, want 1", n)
	}
}
