package broker

// PauseMirrorTopics: v0
//
// Behavior:
// Pauses mirroring; the topics stay read-only. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 102).
//
// Authorization: ALTER on the cluster mirror, else
// CLUSTER_MIRROR_AUTHORIZATION_FAILED; then ALTER_CONFIGS on every named
// topic, else a top-level TOPIC_AUTHORIZATION_FAILED naming them.
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(102, 0, 0, (*Broker).handleMirrorRPC) }
