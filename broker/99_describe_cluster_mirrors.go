package broker

// DescribeClusterMirrors: v0
//
// Behavior:
// Describes mirror partitions (offsets, lag, state) and answers last-mirror-epoch lookups for failbacks. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 99).
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(99, 0, 0, (*Broker).handleMirrorRPC) }
