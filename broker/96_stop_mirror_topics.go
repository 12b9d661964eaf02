package broker

// StopMirrorTopics: v0
//
// Behavior:
// Stops mirroring topics (failover): open transactions aborted, producer state reset, topics writable. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 96).
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(96, 0, 0, (*Broker).handleMirrorRPC) }
