package broker

// DescribeClusterMirrors: v0
//
// Behavior:
// Describes mirror partitions (offsets, lag, state) and answers last-mirror-epoch lookups for failbacks. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 99).
//
// Authorization: DESCRIBE on each mirror: describing every mirror
// leaves out the others silently, a named one without it answers
// CLUSTER_MIRROR_AUTHORIZATION_FAILED. AuthorizedOperations, when asked
// for, are the sender's. The last-mirror-epoch lookups are answered
// whatever the mirror ACLs, as in the prototype.
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(99, 0, 0, (*Broker).handleMirrorRPC) }
