package main

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirrorapi"
)

// A mirror RPC is sent again only when the controller refused all of it
// (NOT_CONTROLLER at the top, or for every topic): an answer that did some
// topics is reported as it is, so that no stop's report is lost to a
// second answer.
func TestControllerMovedOnlyWhenNothingWasDone(t *testing.T) {
	t.Parallel()
	moved, other := kerr.NotController.Code, kerr.UnknownServerError.Code
	stop := func(top int16, topics ...int16) kmsg.Response {
		r := mirrorapi.NewPtrStopMirrorTopicsResponse()
		r.ErrorCode = top
		for i, code := range topics {
			r.Topics = append(r.Topics, mirrorapi.MirrorTopicsResponseTopic{Name: string(rune('a' + i)), ErrorCode: code})
		}
		return r
	}
	create := mirrorapi.NewPtrCreateClusterMirrorResponse()
	create.ErrorCode = moved
	describe := mirrorapi.NewPtrDescribeClusterMirrorsResponse()
	describe.Mirrors = []mirrorapi.DescribeClusterMirrorsResponseMirror{{MirrorName: "dr", ErrorCode: moved}}
	for _, c := range []struct {
		name string
		resp kmsg.Response
		want bool
	}{
		{"top-level NOT_CONTROLLER", stop(moved), true},
		{"every topic NOT_CONTROLLER", stop(0, moved, moved), true},
		{"one topic done", stop(0, moved, 0), false},
		{"one topic failed otherwise", stop(0, moved, other), false},
		{"all done", stop(0, 0, 0), false},
		{"no topics, no error", stop(0), false},
		{"another top-level error", stop(other, moved), false},
		{"top-level NOT_CONTROLLER after a topic was done", stop(moved, 0), false},
		{"top-level NOT_CONTROLLER, the topic refused too", stop(moved, moved), true},
		{"create", create, true},
		{"describe", describe, true},
	} {
		if got := controllerMoved(c.resp); got != c.want {
			t.Errorf("%s: controllerMoved %v, want %v", c.name, got, c.want)
		}
	}
}

// Every --timeout gives a client kgo accepts: kgo refuses a read timeout
// outside 100 ms to 15 min, and a --timeout of 20m or 50ms used to fail
// every action.
func TestMirrorsClientForAnyTimeout(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Millisecond, 50 * time.Millisecond, time.Minute, 20 * time.Minute, 24 * time.Hour} {
		f := &mirrorsFlags{bootstrap: "127.0.0.1:1", timeout: d}
		cl, err := f.client()
		if err != nil {
			t.Errorf("--timeout %v: %v", d, err)
			continue
		}
		cl.Close()
	}
}
