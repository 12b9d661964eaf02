package broker

// RecoverMirrorTopics: v0
//
// Behavior:
// Restarts FAILED partitions of topics, including non-retryable failures. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 107).
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(107, 0, 0, (*Broker).handleMirrorRPC) }
