package broker

// ListClusterMirrors: v0
//
// Behavior:
// Lists the mirrors with their source and topics. Served by the mirror control plane (control/) through
// MirrorAdmin; the wire layout is mirrorapi's (KIP-1279 prototype key 98).
//
// Authorization: the mirrors without DESCRIBE are left out silently.
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(98, 0, 0, (*Broker).handleMirrorRPC) }
