package broker

import (
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/mirrorapi"
)

// With DeferServing, a request that arrives before the node is wired
// waits and is answered once StartServing runs: a mirror RPC sent in the
// window between New and SetMirrorAdmin used to close the connection, as
// an unknown API key does (issue 19 item 4: listeners accept requests
// only once the node is wired).
func TestDeferServingWaitsForTheWiring(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) { c.DeferServing = true })
	rc := dialRaw(t, b)
	req := mirrorapi.NewPtrListClusterMirrorsRequest()
	corr := rc.send(req)
	if frame, err := rc.readFrame(200 * time.Millisecond); err == nil {
		t.Fatalf("answered before StartServing: %d bytes", len(frame))
	}
	b.SetMirrorAdmin(&fakeMirrorAdmin{mirrors: []string{"m"}})
	b.StartServing()
	resp := rc.recv(req, corr).(*mirrorapi.ListClusterMirrorsResponse)
	if len(resp.Mirrors) != 1 || resp.Mirrors[0].MirrorName != "m" {
		t.Fatalf("the answer once wired: %+v", resp)
	}
}

// A broker closed before it served anything closes the waiting
// connections instead of hanging its Close.
func TestDeferServingClose(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) { c.DeferServing = true })
	rc := dialRaw(t, b)
	rc.send(mirrorapi.NewPtrListClusterMirrorsRequest())
	// The request waits in Serve (counted just before it) when Close runs.
	testutil.CheckFor(t, testutil.Timeout, testutil.True("the request reaches the broker",
		func() bool { return b.NetStats().Requests.Load() >= 1 }))
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Close hung on a request waiting for StartServing")
	}
	rc.expectClosed()
}
