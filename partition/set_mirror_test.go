package partition

import "testing"

// SetMirrorOf hands several topics to a mirror and releases them in one
// call; an unknown topic changes none; the change survives a restart.
func TestSetMirrorOf(t *testing.T) {
	t.Parallel()
	n := newTestNode(t)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := n.m.Create(name, 1, nil, [16]byte{}, "", Placement{RF: 1}); err != nil {
			t.Fatal(err)
		}
	}
	readOnly := func() (got [3]bool) {
		for i, name := range []string{"a", "b", "c"} {
			got[i] = n.m.Topic(name).ReadOnly()
		}
		return got
	}
	if err := n.m.SetMirrorOf([]string{"b", "a", "a"}, "dr"); err != nil {
		t.Fatal(err)
	}
	if got := readOnly(); got != [3]bool{true, true, false} {
		t.Fatalf("read-only after handing a and b to dr: %v", got)
	}
	if err := n.m.SetMirrorOf([]string{"c", "missing"}, "dr"); err == nil {
		t.Fatal("an unknown topic accepted")
	}
	if got := readOnly(); got != [3]bool{true, true, false} {
		t.Fatalf("read-only after a refused call: %v", got)
	}
	n.reopen()
	if got := readOnly(); got != [3]bool{true, true, false} {
		t.Fatalf("read-only after a restart: %v", got)
	}
	if err := n.m.SetMirrorOf([]string{"a", "b", "c"}, ""); err != nil {
		t.Fatal(err)
	}
	if got := readOnly(); got != [3]bool{} {
		t.Fatalf("read-only after releasing all: %v", got)
	}
}
