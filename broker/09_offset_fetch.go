package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetFetch: v1-9
//
// Behavior:
// Committed offsets of one group (v0-7) or several (v8+); unknown groups and partitions answer offset -1. RequireStable (v7+) has nothing to wait for until transactions exist.
//
// Version notes:
// v1 is the floor (Kafka 4.0); v5 leader epochs; v6 flexible; v8 several groups; v9 member id and epoch (KIP-848, ignored).
func init() { regKey(9, 1, 9, (*Broker).handleOffsetFetch) }

func (b *Broker) handleOffsetFetch(r *request) (kmsg.Response, error) {
	return b.groups.OffsetFetch(r.kreq.(*kmsg.OffsetFetchRequest)), nil
}
