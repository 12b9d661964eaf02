package broker

// StartMirrorTopics: v0
//
// Behavior:
// Starts mirroring topics named or matched at the source: local read-only topics with the source ids and partition counts. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 95).
//
// Authorization: ALTER on the cluster mirror, else
// CLUSTER_MIRROR_AUTHORIZATION_FAILED; then ALTER_CONFIGS on every named
// topic, else a top-level TOPIC_AUTHORIZATION_FAILED naming them and
// nothing is started (as the KIP-1279 prototype's controller).
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(95, 0, 0, (*Broker).handleMirrorRPC) }
