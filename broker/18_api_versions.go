package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-4
//
// Behavior:
// Lists every API key served on the request's listener with its exact
// version range, from the handler table: the CONTROLLER listener serves
// and lists only the controller's keys, the others all but the inter-node
// ones (controller_listener.go). A version newer than ours is answered in v0 form with
// UNSUPPORTED_VERSION and the ranges (KIP-511), so the client retries
// with a version we know.
//
// Version notes:
// v3 adds the client software name and version (not checked) and
// flexible encoding; the response header stays v0 for every version.
func init() { regKey(apiVersionsKey, 0, 4, (*Broker).handleApiVersions) }

func (b *Broker) handleApiVersions(r *request) (kmsg.Response, error) {
	resp := r.kreq.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = b.appendApiKeys(resp.ApiKeys, b.scope(r.conn))
	return resp, nil
}

// appendApiKeys appends the keys a listener of scope serves, less those of
// a protocol the configuration turns off.
func (b *Broker) appendApiKeys(dst []kmsg.ApiVersionsResponseApiKey, scope listenerScope) []kmsg.ApiVersionsResponseApiKey {
	for key, h := range handlers {
		if h == nil || !scope.serves(int16(key)) || !b.protocolEnabled(int16(key)) {
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
// know, on a listener of scope.
func (b *Broker) apiVersionsFallback(out []byte, scope listenerScope) []byte {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = b.appendApiKeys(nil, scope)
	return resp.AppendTo(out)
}

// protocolEnabled reports whether key's protocol is on: the consumer group
// protocol's keys are listed only with "consumer" in
// group.coordinator.rebalance.protocols, the share groups' only with
// "share" (clients then keep to the
// classic protocol; a request sent anyway is UNSUPPORTED_VERSION).
func (b *Broker) protocolEnabled(key int16) bool {
	switch key {
	case consumerGroupHeartbeatKey, consumerGroupDescribeKey:
		return b.cfg.ConsumerProtocol()
	case shareGroupHeartbeatKey, shareGroupDescribeKey, shareFetchKey, shareAcknowledgeKey, readShareGroupStateKey, writeShareGroupStateKey,
		describeShareGroupOffsetsKey, alterShareGroupOffsetsKey, deleteShareGroupOffsetsKey:
		return b.cfg.ShareProtocol()
	}
	return true
}
