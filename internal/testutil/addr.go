package testutil

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Ports FreeAddr hands out: below Linux's ephemeral range (32768-60999 by
// default), which the kernel draws from for every listener on port 0 and
// every outgoing connection's source port.
const (
	reservedPortLow  = 20000
	reservedPortHigh = 32000
)

// FreeAddr is a loopback host:port for a listener that must be known
// before it binds (a quorum's voters name each other), reserved for the
// test's life.
//
// WHY not "listen on port 0, close, hand the port out": between the close
// and the test's bind, another test process's port-0 listener or
// outgoing connection could take it (CI failed on it: "address already
// in use" on a node's CONTROLLER port). A port below the ephemeral range
// is never handed out by the kernel, and a lock file per port (flock,
// released when the test ends or the process dies) keeps two test
// processes from choosing the same one.
func FreeAddr(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "kmirror-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	span := reservedPortHigh - reservedPortLow
	start := rand.IntN(span)
	for i := range span {
		port := reservedPortLow + (start+i)%span
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another test process holds it
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			f.Close() // held by something that is not a test of ours
			continue
		}
		ln.Close()
		t.Cleanup(func() { f.Close() })
		return addr
	}
	t.Fatalf("no free loopback port in %d-%d", reservedPortLow, reservedPortHigh)
	return ""
}
