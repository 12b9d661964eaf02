package broker

// StartMirrorTopics: v0
//
// Behavior:
// Starts mirroring topics named or matched at the source: local read-only topics with the source ids and partition counts. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 95).
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(95, 0, 0, (*Broker).handleMirrorRPC) }
