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
		min := h.min
		if key == produceKey {
			// librdkafka up to 2.11 compresses with gzip, snappy or lz4 only
			// if the broker advertises Produce v0; otherwise it silently
			// sends uncompressed batches. Kafka 4.0 advertises v0 for the
			// same reason (KAFKA-18659) and, like us, refuses v0-2 requests.
			min = 0
		}
		dst = append(dst, kmsg.ApiVersionsResponseApiKey{ApiKey: int16(key), MinVersion: min, MaxVersion: h.max})
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
