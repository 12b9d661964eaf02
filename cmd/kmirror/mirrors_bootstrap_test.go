package main

import (
	"testing"

	"github.com/kmirror/kmirror/internal/testutil"
)

// --bootstrap-server takes a comma list, as Kafka's tools do, and the
// request goes to whichever node answers: a dead first (or last) address
// does not stop the command.
func TestMirrorsBootstrapList(t *testing.T) {
	t.Parallel()
	n := startMirrorsNode(t, "A")
	dead := testutil.FreeAddr(t) // nothing listens there
	for _, list := range []string{dead + "," + n.Addr(), n.Addr() + ", " + dead} {
		out := mustMirrors(t, "--list", "--bootstrap-server", list)
		if _, err := parseTable(out, listHeader...); err != nil {
			t.Fatalf("--list --bootstrap-server %s: %v", list, err)
		}
	}
}
