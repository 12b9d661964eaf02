package broker

// ResumeMirrorTopics: v0
//
// Behavior:
// Resumes paused topics from the local log end. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 103).
//
// Authorization: ALTER on the cluster mirror, else
// CLUSTER_MIRROR_AUTHORIZATION_FAILED; then ALTER_CONFIGS on every named
// topic, else a top-level TOPIC_AUTHORIZATION_FAILED naming them.
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(103, 0, 0, (*Broker).handleMirrorRPC) }
