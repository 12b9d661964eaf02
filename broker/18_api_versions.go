package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-4
//
// Behavior:
// Lists every API key served with its exact version range, from the
// handler table. A version newer than ours is answered in v0 form with
// UNSUPPORTED_VERSION and the ranges (KIP-511), so the client retries
// with a version we know.
//
// Version notes:
// v3 adds the client software name and version (not checked) and
// flexible encoding; the response header stays v0 for every version.
func init() { regKey(apiVersionsKey, 0, 4, (*Broker).handleApiVersions) }

func (b *Broker) handleApiVersions(r *request) (kmsg.Response, error) {
	resp := r.kreq.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = appendApiKeys(resp.ApiKeys)
	return resp, nil
}

func appendApiKeys(dst []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey {
	for key, h := range handlers {
		if h == nil {
			continue
		}
		dst = append(dst, kmsg.ApiVersionsResponseApiKey{ApiKey: int16(key), MinVersion: h.min, MaxVersion: h.max})
	}
	return dst
}

// apiVersionsFallback answers an ApiVersions request of a version we do not
// know.
func (b *Broker) apiVersionsFallback(out []byte) []byte {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = appendApiKeys(nil)
	return resp.AppendTo(out)
}
