package broker

// DeleteClusterMirror: v0
//
// Behavior:
// Deletes a mirror whose topics are all stopped. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 104).
//
// Authorization: DELETE on the cluster mirror, else
// CLUSTER_MIRROR_AUTHORIZATION_FAILED (the broker's check in the
// prototype; its controller asks for ALTER).
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(104, 0, 0, (*Broker).handleMirrorRPC) }
