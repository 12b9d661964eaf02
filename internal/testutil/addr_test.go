package testutil

import (
	"net"
	"strconv"
	"testing"
)

// FreeAddr's addresses are distinct while their tests run, bindable, and
// outside the kernel's ephemeral range (where port-0 listeners of other
// processes could take them first).
func TestFreeAddrReservesDistinctPortsOutsideTheEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, p, _ := net.SplitHostPort(addr)
		if port, _ := strconv.Atoi(p); port < reservedPortLow || port >= reservedPortHigh {
			t.Fatalf("%s is outside %d-%d", addr, reservedPortLow, reservedPortHigh)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("binding %s: %v", addr, err)
		}
		ln.Close()
	}
}
