package broker

// CreateClusterMirror: v0
//
// Behavior:
// Creates a cluster mirror from its configs (bootstrap.servers required); the source cluster id is captured. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 94).
//
// Authorization: CREATE on the cluster mirror (resource type CLUSTER_MIRROR, 8), else
// CLUSTER_MIRROR_AUTHORIZATION_FAILED.
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(94, 0, 0, (*Broker).handleMirrorRPC) }
