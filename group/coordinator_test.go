package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// threeGroups makes "simple" (offsets only: Empty, no protocol type),
// "stable" (one consumer member) and "completing" (a connect member that
// has not synced).
func threeGroups(t *testing.T, c *Coordinator) (stable, completing *client) {
	t.Helper()
	req := commitReq(8, "simple", nil, off{"t", 0, 1, -1, nil})
	wantCode(t, "commit", commitCodes(t, req, c.OffsetCommit(req))[0], nil)
	stable = newClient(t, c, "stable", "s")
	form(t, stable)
	completing = newClient(t, c, "completing", "x")
	completing.protocolType = "connect"
	completing.joined(recv(t, completing.join()))
	return stable, completing
}

func TestListGroups(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{})
	threeGroups(t, c)
	for _, tt := range []struct {
		name   string
		states []string
		types  []string
		want   []string
	}{
		{"no filter", nil, nil, []string{"completing/connect/CompletingRebalance", "simple//Empty", "stable/consumer/Stable"}},
		{"one state", []string{"Stable"}, nil, []string{"stable/consumer/Stable"}},
		{"states ignore case", []string{"empty", "COMPLETINGREBALANCE"}, nil, []string{"completing/connect/CompletingRebalance", "simple//Empty"}},
		{"state no group is in", []string{"PreparingRebalance"}, nil, nil},
		{"classic type", nil, []string{"Classic"}, []string{"completing/connect/CompletingRebalance", "simple//Empty", "stable/consumer/Stable"}},
		{"consumer type", nil, []string{"consumer"}, nil},
		{"consumer or classic type", nil, []string{"consumer", "classic"}, []string{"completing/connect/CompletingRebalance", "simple//Empty", "stable/consumer/Stable"}},
		{"both filters", []string{"Stable", "Empty"}, []string{"classic"}, []string{"simple//Empty", "stable/consumer/Stable"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := kmsg.NewPtrListGroupsRequest()
			req.Version, req.StatesFilter, req.TypesFilter = 5, tt.states, tt.types
			resp := c.ListGroups(req)
			wantCode(t, "list", resp.ErrorCode, nil)
			var got []string
			for _, g := range resp.Groups {
				if g.GroupType != "classic" {
					t.Errorf("group %s of type %q", g.Group, g.GroupType)
				}
				got = append(got, g.Group+"/"+g.ProtocolType+"/"+g.GroupState)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("listed %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDescribeGroups(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{})
	s, x := threeGroups(t, c)
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{"stable", "completing", "simple", "nope", ""}
	resp := c.DescribeGroups(req)
	if len(resp.Groups) != len(req.Groups) {
		t.Fatalf("%d groups described", len(resp.Groups))
	}
	type member struct{ id, clientID, host, meta, assignment string }
	for i, tt := range []struct {
		state, protocolType, protocol string
		members                       []member
		code                          *kerr.Error
	}{
		{"Stable", "consumer", "range", []member{{s.id, "s", "/10.0.0.1", "s/range", string(assignmentOf(s.id))}}, nil},
		{"CompletingRebalance", "connect", "range", []member{{x.id, "x", "/10.0.0.1", "x/range", ""}}, nil},
		{"Empty", "", "", nil, nil},
		{"Dead", "", "", nil, nil},
		{"Dead", "", "", nil, kerr.InvalidGroupID},
	} {
		d := resp.Groups[i]
		if d.Group != req.Groups[i] || d.State != tt.state || d.ProtocolType != tt.protocolType || d.Protocol != tt.protocol {
			t.Errorf("group %q: %q %q %q %q; want %q %q %q", req.Groups[i], d.Group, d.State, d.ProtocolType, d.Protocol,
				tt.state, tt.protocolType, tt.protocol)
		}
		wantCode(t, "describe "+req.Groups[i], d.ErrorCode, tt.code)
		var got []member
		for _, m := range d.Members {
			got = append(got, member{m.MemberID, m.ClientID, m.ClientHost, string(m.ProtocolMetadata), string(m.MemberAssignment)})
		}
		if !slices.Equal(got, tt.members) {
			t.Errorf("group %q members %+v, want %+v", req.Groups[i], got, tt.members)
		}
	}

	// Rebalancing, the group has no assignment to show.
	n := newClient(t, c, "stable", "n")
	n.join()
	waitState(t, c, "stable", "PreparingRebalance", 2)
	d := describe(t, c, "stable")
	if d.State != "PreparingRebalance" || len(d.Members) != 2 {
		t.Fatalf("rebalancing group described %s with %d members", d.State, len(d.Members))
	}
	for _, m := range d.Members {
		if len(m.MemberAssignment) != 0 {
			t.Fatalf("rebalancing member %s described with assignment %q", m.ClientID, m.MemberAssignment)
		}
	}
}

// DeleteGroups deletes empty groups with their offsets, in the store too.
func TestDeleteGroups(t *testing.T) {
	t.Parallel()
	store := openStateStore(t)
	c := newCoordinator(t, store, Config{})
	threeGroups(t, c)
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = []string{"stable", "completing", "nope", "simple", ""}
	resp := c.DeleteGroups(req)
	want := []*kerr.Error{kerr.NonEmptyGroup, kerr.NonEmptyGroup, kerr.GroupIDNotFound, nil, kerr.InvalidGroupID}
	if len(resp.Groups) != len(want) {
		t.Fatalf("%d groups answered", len(resp.Groups))
	}
	for i, g := range resp.Groups {
		if g.Group != req.Groups[i] {
			t.Fatalf("answer %d for %q", i, g.Group)
		}
		wantCode(t, "delete "+g.Group, g.ErrorCode, want[i])
	}

	if offs, err := store.GroupOffsets("simple"); err != nil || len(offs) != 0 {
		t.Fatalf("store still holds %v (%v)", offs, err)
	}
	metas, err := store.Groups()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range metas {
		names = append(names, m.Group)
	}
	if slices.Contains(names, "simple") || !slices.Contains(names, "stable") {
		t.Fatalf("store holds groups %q", names)
	}
	wantFetched(t, fetchAll(t, c, "simple"))
	if d := describe(t, c, "simple"); d.State != "Dead" {
		t.Fatalf("deleted group described %s", d.State)
	}
	list := c.ListGroups(kmsg.NewPtrListGroupsRequest())
	for _, g := range list.Groups {
		if g.Group == "simple" {
			t.Fatal("deleted group listed")
		}
	}
	// Deleting again finds nothing.
	req.Groups = []string{"simple"}
	wantCode(t, "second delete", c.DeleteGroups(req).Groups[0].ErrorCode, kerr.GroupIDNotFound)
}

// A coordinator started on the store of a closed one finds its groups
// Empty, with their generations, protocol types and offsets.
func TestRestart(t *testing.T) {
	t.Parallel()
	for _, inMemory := range []bool{true, false} {
		name := map[bool]string{true: "in memory", false: "on disk"}[inMemory]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var store badgerStore
			if inMemory {
				store = openStateStore(t)
			} else {
				s, err := state.Open(t.TempDir(), state.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				store = badgerStore{s}
			}
			c := newCoordinator(t, store, Config{})
			a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
			form(t, a, b)
			gen := a.gen
			req := commitReq(8, "g", b, off{"t", 0, 100, 7, strp("meta")}, off{"t", 1, 200, 7, nil})
			for _, code := range commitCodes(t, req, c.OffsetCommit(req)) {
				wantCode(t, "commit", code, nil)
			}
			req = commitReq(8, "simple", nil, off{"u", 3, 30, -1, nil})
			wantCode(t, "simple commit", commitCodes(t, req, c.OffsetCommit(req))[0], nil)
			c.Close()

			c = newCoordinator(t, store, Config{})
			if st, g, n := stateOf(c, "g"); st != "Empty" || g != gen || n != 0 {
				t.Fatalf("group g is %s, generation %d, %d members; want Empty, %d, 0", st, g, n, gen)
			}
			wantFetched(t, fetchAll(t, c, "g"), `t/0=100 e7 "meta"`, `t/1=200 e7 ""`)
			wantFetched(t, fetchAll(t, c, "simple"), `u/3=30 e-1 ""`)
			list := c.ListGroups(kmsg.NewPtrListGroupsRequest())
			var got []string
			for _, g := range list.Groups {
				got = append(got, g.Group+"/"+g.ProtocolType+"/"+g.GroupState)
			}
			if want := []string{"g/consumer/Empty", "simple//Empty"}; !slices.Equal(got, want) {
				t.Fatalf("listed %q, want %q", got, want)
			}

			// The old members are gone; they rejoin into the next
			// generation.
			for _, m := range []*client{a, b} {
				m.c = c
				wantCode(t, m.clientID+"'s old heartbeat", m.heartbeat(), kerr.UnknownMemberID)
				m.id = ""
			}
			form(t, a)
			if a.gen != gen+1 {
				t.Fatalf("rejoined generation %d, want %d", a.gen, gen+1)
			}
		})
	}
}
