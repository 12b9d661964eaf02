package group

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups lists groups, filtered by state (v4+, case-insensitive) and
// type (v5+: "classic", "consumer" or "share").
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	matches := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		dead, pt, st, typ := g.state == stateDead, g.protocolType, g.state.String(), "classic"
		switch {
		case g.consumer != nil:
			st, typ = g.consumer.state(), "consumer"
		case g.share != nil:
			st, typ = g.share.state(), "share"
		}
		g.mu.Unlock()
		if dead || !matches(req.StatesFilter, st) || !matches(req.TypesFilter, typ) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.name, pt, st, typ
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// DescribeGroups describes groups; an unknown group is reported Dead, with
// no error before v6 and GROUP_ID_NOT_FOUND since (KIP-1043), as Kafka does.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = name
		dg.State = stateDead.String()
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = allGroupOperations
		}
		if name == "" {
			dg.ErrorCode = kerr.InvalidGroupID.Code
		}
		if g := c.group(name, false); g != nil {
			g.mu.Lock()
			g.describe(&dg)
			g.mu.Unlock()
		}
		if dg.State == stateDead.String() && dg.ErrorCode == 0 && req.Version >= 6 {
			// KIP-1043: from v6 a group that does not exist is an error.
			msg := "group " + name + " does not exist"
			dg.ErrorCode, dg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// allGroupOperations is Kafka's bitfield of READ, DESCRIBE and DELETE on a
// group (bits 3, 8 and 6): every operation, as there is no authorizer yet.
const allGroupOperations = 1<<3 | 1<<8 | 1<<6

// DeleteGroups deletes empty groups with their offsets.
func (c *Coordinator) DeleteGroups(req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		rg.ErrorCode = c.deleteGroup(name)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(name string) int16 {
	if name == "" {
		return kerr.InvalidGroupID.Code
	}
	g := c.group(name, false)
	if g == nil {
		return kerr.GroupIDNotFound.Code
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.state == stateDead:
		return kerr.GroupIDNotFound.Code
	case g.state != stateEmpty || g.consumer.active() || (g.share != nil && len(g.share.members) > 0):
		return kerr.NonEmptyGroup.Code
	}
	if g.share != nil {
		mark := len(g.share.unwritten)
		g.share.unwritten = append(g.share.unwritten, g.shareOffsetTombstones()...)
		g.share.unwritten = append(g.share.unwritten, shareGroupTombstones(name)...)
		if err := g.writeShare(); err != nil {
			g.share.unwritten = g.share.unwritten[:mark] // not deleted: its tombstones must not go out later
			return err.Code
		}
	}
	if g.consumer != nil {
		mark := len(g.consumer.unwritten)
		g.consumer.unwritten = append(g.consumer.unwritten, consumerGroupTombstones(name)...)
		if err := g.writeConsumer(); err != nil {
			g.consumer.unwritten = g.consumer.unwritten[:mark] // not deleted: its tombstones must not go out later
			return err.Code
		}
	}
	if err := c.store.DeleteGroup(name); err != nil {
		c.log.Warn("deleting a group failed", "group", name, "err", err)
		return storeErrorCode(err)
	}
	g.state = stateDead
	g.shutdownLocked()
	c.removeIfDead(g)
	c.log.Info("group deleted", "group", name)
	return 0
}

// describe fills dg with g as DescribeGroups shows it. A consumer group
// shows its state, "consumer" and its assignor, and its members without
// protocol bytes (ConsumerGroupDescribe has the rest), as Kafka 4 does.
// REQUIRES: g.mu held.
func (g *Group) describe(dg *kmsg.DescribeGroupsResponseGroup) {
	if g.share != nil {
		// Not a classic group: Kafka describes it as one that does not
		// exist (ShareGroupDescribe has it).
		return
	}
	if cg := g.consumer; cg != nil {
		dg.State, dg.ProtocolType, dg.Protocol = cg.state(), g.protocolType, cg.assignor
		for _, m := range cg.sortedMembers() {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.clientHost
			if m.instanceID != "" {
				dm.InstanceID = &m.instanceID
			}
			dg.Members = append(dg.Members, dm)
		}
		return
	}
	dg.State, dg.ProtocolType, dg.Protocol = g.state.String(), g.protocolType, g.protocol
	for _, m := range g.sortedMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.clientHost
		if m.instanceID != "" {
			inst := m.instanceID
			dm.InstanceID = &inst
		}
		for _, p := range m.protocols {
			if p.Name == g.protocol {
				dm.ProtocolMetadata = p.Metadata
			}
		}
		if g.state == stateStable {
			dm.MemberAssignment = m.assignment
		}
		dg.Members = append(dg.Members, dm)
	}
}
