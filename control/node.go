package control

import (
	"context"

	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// Node is the node the control plane runs on, as the control plane uses
// it (the broker implements it; the composition root, node/, wires the
// two): its partitions, which the fetchers write and the plane reads; its
// state store, whose mirror records the plane owns; and the changes a
// mirror makes to the node's topics, groups, ACLs and quotas, which go
// through the node's Kafka API so that they serialise with clients' admin
// requests. The plane never imports the broker: the broker imports
// nothing of the plane either (it sees it as a broker.MirrorAdmin).
type Node interface {
	ClusterID() string
	// NodeID is this node's node.id.
	NodeID() int32
	// IsController reports whether this node is the cluster's controller
	// (always, on a node alone): the node that runs each mirror's
	// mirror-level work (the metadata sync, the topics' release) and whose
	// plane answers the mirror RPCs, which every other node forwards.
	IsController() bool
	// InCluster reports whether the node is one of a cluster of several,
	// where every partition has a leader the controller assigned.
	InCluster() bool
	Partitions() *partition.Manager
	Store() *state.Store

	// CreateMirrorTopic creates a read-only topic owned by mirror, with
	// the source's topic id and partition count.
	CreateMirrorTopic(name string, id [16]byte, partitions int32, mirror string) error
	// GrowMirrorTopic adds partitions to a mirror topic.
	GrowMirrorTopic(name string, partitions int32) error
	// SetTopicsMirror hands topics to a mirror, or with "" releases
	// them, in one write.
	SetTopicsMirror(names []string, mirror string) error
	// MergeTopicConfigs sets configs on a topic, keeping the others; the
	// ones refused are returned by name.
	MergeTopicConfigs(name string, set map[string]string) (rejected map[string]error, err error)

	// GroupActive reports whether a group has members on this node.
	GroupActive(ctx context.Context, group string) (bool, error)
	// CommitGroupOffsets commits offsets as an admin tool does
	// (generation -1, no member).
	CommitGroupOffsets(ctx context.Context, group string, offs []state.GroupOffset) error
	// ShareGroups reports whether share groups are served here;
	// AlterShareStartOffsets sets a share group's start offsets, as an
	// admin tool does (broker.ErrShareGroupActive for a group with
	// members).
	ShareGroups() bool
	AlterShareStartOffsets(ctx context.Context, group string, offs map[string]map[int32]int64) error

	ACLs() ([]state.ACL, error)
	CreateACLs(acls []state.ACL) error
	DeleteACLs(acls []state.ACL) error
	ClientQuotas() []state.ClientQuota
	SetClientQuotas(put []state.ClientQuota) error
}
