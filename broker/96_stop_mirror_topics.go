package broker

// StopMirrorTopics: v0
//
// Behavior:
// Stops mirroring topics (failover): open transactions aborted, producer state reset, topics writable. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 96).
//
// Authorization: ALTER on the cluster mirror, else
// CLUSTER_MIRROR_AUTHORIZATION_FAILED; then ALTER_CONFIGS on every named
// topic, else a top-level TOPIC_AUTHORIZATION_FAILED naming them and
// nothing is stopped.
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(96, 0, 0, (*Broker).handleMirrorRPC) }
