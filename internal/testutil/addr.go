package testutil

import (
	"net"
	"testing"
)

// FreeAddr is a loopback host:port no listener holds now, for a listener
// that must be known before it binds (a quorum's voters name each other).
// Another process may take it first: rare, and the test then fails on
// the bind instead of hanging.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
