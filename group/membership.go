package group

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memberCheck applies the checks SyncGroup, Heartbeat and OffsetCommit
// share: the member exists, its static instance id still maps to it, and
// the generation is current.
// REQUIRES: g.mu held.
func (g *Group) memberCheck(memberID string, instanceID *string, generation int32) (*member, *kerr.Error) {
	m := g.members[memberID]
	switch {
	case instanceID != nil && *instanceID != "" && g.static[*instanceID] != "" && g.static[*instanceID] != memberID:
		return nil, kerr.FencedInstanceID
	case m == nil:
		return nil, kerr.UnknownMemberID
	case generation != g.generation:
		return m, kerr.IllegalGeneration
	}
	return m, nil
}

// SyncGroup handles a SyncGroup request: the leader's brings the
// assignment and ends the rebalance; the others wait for it.
func (c *Coordinator) SyncGroup(req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	g := c.group(req.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	g.mu.Lock()
	m, err := g.memberCheck(req.MemberID, req.InstanceID, req.Generation)
	if err == nil && (req.ProtocolType != nil && *req.ProtocolType != g.protocolType ||
		req.Protocol != nil && *req.Protocol != g.protocol) {
		err = kerr.InconsistentGroupProtocol
	}
	if err != nil {
		g.mu.Unlock()
		resp.ErrorCode = err.Code
		return resp
	}
	g.resetExpiry(m)
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	switch g.state {
	case statePreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	case stateStable:
		resp.MemberAssignment = m.assignment
	case stateCompletingRebalance:
		if m.id != g.leader {
			if m.sync != nil {
				g.answerSyncError(m, kerr.RebalanceInProgress)
			}
			ch := make(chan *kmsg.SyncGroupResponse, 1)
			m.sync, m.syncVersion = ch, req.Version
			g.mu.Unlock()
			return <-ch
		}
		g.completeSync(req.GroupAssignment)
		resp.MemberAssignment = m.assignment
	default:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	}
	g.mu.Unlock()
	return resp
}

// completeSync stores the leader's assignment and answers the waiting
// members: the group is Stable.
func (g *Group) completeSync(assignments []kmsg.SyncGroupRequestGroupAssignment) {
	stopTimer(&g.syncTimer)
	for _, a := range assignments {
		if m := g.members[a.MemberID]; m != nil {
			m.assignment = bytes.Clone(a.MemberAssignment) // the request buffer is pooled
		}
	}
	g.state = stateStable
	// Stored before any member hears of it, as Kafka answers SyncGroup
	// once the group's record is appended: a new coordinator then serves
	// this generation as it is.
	g.persistMeta()
	for _, m := range g.members {
		if m.sync != nil {
			resp := kmsg.NewPtrSyncGroupResponse()
			resp.Version = m.syncVersion
			pt, p := g.protocolType, g.protocol
			resp.ProtocolType, resp.Protocol = &pt, &p
			resp.MemberAssignment = m.assignment
			m.sync <- resp
			m.sync = nil
		}
	}
	g.c.log.Info("group stable", "group", g.name, "generation", g.generation, "members", len(g.members))
}

// Heartbeat handles a Heartbeat: it keeps the member's session alive and
// tells it when a rebalance is under way.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	g := c.group(req.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m, err := g.memberCheck(req.MemberID, req.InstanceID, req.Generation)
	if m != nil && (err == nil || err == kerr.IllegalGeneration) && m.join == nil {
		g.resetExpiry(m)
	}
	switch {
	case err != nil:
		resp.ErrorCode = err.Code
	case g.state == statePreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	case g.state != stateStable && g.state != stateCompletingRebalance:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	}
	// CompletingRebalance answers NONE, as Kafka does: a member that got
	// its JoinGroup response may heartbeat before its SyncGroup, and it is
	// already in the new generation.
	return resp
}

// LeaveGroup removes members (one before v3, a batch since, by member id
// or static instance id).
func (c *Coordinator) LeaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leavers := req.Members
	if req.Version < 3 {
		leavers = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	g := c.group(req.Group, false)
	if g == nil {
		// Kafka answers every leaver UNKNOWN_MEMBER_ID (v3+), with no
		// top-level error.
		for _, l := range leavers {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = l.MemberID, l.InstanceID, kerr.UnknownMemberID.Code
			resp.Members = append(resp.Members, rm)
		}
		if req.Version < 3 {
			resp.ErrorCode, resp.Members = kerr.UnknownMemberID.Code, nil
		}
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	left := 0
	for _, l := range leavers {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = l.MemberID, l.InstanceID
		id := l.MemberID
		if l.InstanceID != nil && *l.InstanceID != "" {
			known := g.static[*l.InstanceID]
			switch {
			case known == "":
				rm.ErrorCode = kerr.UnknownMemberID.Code
			case id != "" && id != known:
				rm.ErrorCode = kerr.FencedInstanceID.Code
			}
			id = known
		}
		m := g.members[id]
		if rm.ErrorCode == 0 && m == nil {
			rm.ErrorCode = kerr.UnknownMemberID.Code
		}
		if rm.ErrorCode == 0 {
			g.removeMember(m)
			left++
		}
		resp.Members = append(resp.Members, rm)
	}
	if req.Version < 3 && resp.Members[0].ErrorCode != 0 {
		resp.ErrorCode = resp.Members[0].ErrorCode
	}
	if req.Version < 3 {
		resp.Members = nil
	}
	if left > 0 {
		g.memberLeft("members left the group")
	}
	return resp
}
