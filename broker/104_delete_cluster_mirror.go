package broker

// DeleteClusterMirror: v0
//
// Behavior:
// Deletes a mirror whose topics are all stopped. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 104).
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(104, 0, 0, (*Broker).handleMirrorRPC) }
