package main

import (
	"encoding/json"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirrorapi"
)

// --json (issue 16 item 7). --describe prints kafka-cluster-mirrors.sh's
// array of partitions (describeRow), --list an array of mirrors; the other
// actions, which the Kafka tool has no JSON for, print what was asked and
// what each topic answered. None prints the protocol structs (versions,
// throttle times, error codes without names). Errors are printed in the
// JSON and, as without --json, make the command exit 1 with one line on
// stderr.

// listRow is one mirror of --list --json.
type listRow struct {
	Mirror                string   `json:"mirror"`
	Topics                []string `json:"topics"`
	TopicCount            int32    `json:"topicCount"`
	SourceClusterID       *string  `json:"sourceClusterId"`
	SourceBootstrapServer string   `json:"sourceBootstrapServer"`
}

// actionResult is the JSON of --create, --delete and the topic actions.
type actionResult struct {
	Action       string        `json:"action"`
	Mirror       string        `json:"mirror"`
	Error        *string       `json:"error"` // the error's name, null when none
	ErrorMessage *string       `json:"errorMessage"`
	Topics       []topicResult `json:"topics,omitempty"`
}

// topicResult is one topic's answer to a topic action.
type topicResult struct {
	Topic        string  `json:"topic"`
	Error        *string `json:"error"`
	ErrorMessage *string `json:"errorMessage"`
}

// errorName is the name of a non-zero code, nil for 0.
func errorName(code int16) *string {
	if code == 0 {
		return nil
	}
	s := mirrorapi.ErrorName(code)
	return &s
}

// actionAnswer is the answer to an action other than --list and
// --describe: the top-level error and, for the topic actions, each
// topic's.
type actionAnswer struct {
	code   int16
	msg    *string
	topics []mirrorapi.MirrorTopicsResponseTopic
}

// actionAnswerOf extracts resp's answer; ok is false for List and
// Describe responses.
func actionAnswerOf(resp kmsg.Response) (a actionAnswer, ok bool) {
	switch r := resp.(type) {
	case *mirrorapi.CreateClusterMirrorResponse:
		return actionAnswer{r.ErrorCode, r.ErrorMessage, nil}, true
	case *mirrorapi.DeleteClusterMirrorResponse:
		return actionAnswer{r.ErrorCode, r.ErrorMessage, nil}, true
	case *mirrorapi.StartMirrorTopicsResponse:
		return actionAnswer{r.ErrorCode, r.ErrorMessage, r.Topics}, true
	case *mirrorapi.StopMirrorTopicsResponse:
		return actionAnswer{r.ErrorCode, r.ErrorMessage, r.Topics}, true
	case *mirrorapi.PauseMirrorTopicsResponse:
		return actionAnswer{r.ErrorCode, r.ErrorMessage, r.Topics}, true
	case *mirrorapi.ResumeMirrorTopicsResponse:
		return actionAnswer{r.ErrorCode, r.ErrorMessage, r.Topics}, true
	case *mirrorapi.RecoverMirrorTopicsResponse:
		return actionAnswer{r.ErrorCode, r.ErrorMessage, r.Topics}, true
	}
	return actionAnswer{}, false
}

// jsonOf is what --json prints for resp.
func (f *mirrorsFlags) jsonOf(action string, resp kmsg.Response) any {
	if a, ok := actionAnswerOf(resp); ok {
		res := actionResult{Action: action, Mirror: f.mirror, Error: errorName(a.code), ErrorMessage: a.msg}
		for _, t := range a.topics {
			res.Topics = append(res.Topics, topicResult{Topic: t.Name, Error: errorName(t.ErrorCode), ErrorMessage: t.ErrorMessage})
		}
		return res
	}
	switch r := resp.(type) {
	case *mirrorapi.DescribeClusterMirrorsResponse:
		return describeRows(r, f.failed)
	case *mirrorapi.ListClusterMirrorsResponse:
		rows := []listRow{}
		for _, m := range r.Mirrors {
			rows = append(rows, listRow{Mirror: m.MirrorName, Topics: append([]string{}, m.TopicNames...),
				TopicCount: m.TopicCount, SourceClusterID: m.SourceClusterID, SourceBootstrapServer: m.SourceBootstrap})
		}
		return rows
	}
	return resp
}

// printJSON writes resp's JSON form, indented, to out.
func (f *mirrorsFlags) printJSON(action string, resp kmsg.Response, out io.Writer) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(f.jsonOf(action, resp))
}
