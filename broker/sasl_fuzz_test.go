package broker

import (
	"testing"

	"github.com/kmirror/kmirror/state"
)

// FuzzSASLMessages feeds arbitrary client messages to the PLAIN check and
// to both steps of the SCRAM server: they never panic, and nothing but the
// right password authenticates.
func FuzzSASLMessages(f *testing.F) {
	f.Add([]byte("\x00alice\x00alice-pw"), "n,,n=alice,r=abc", "c=biws,r=abc,p=AAAA")
	f.Add([]byte("a\x00b"), "y,,n=x=2Cy,r=1,m=ext", "c=eSws,r=1XYZ,p=====")
	f.Add([]byte{}, "n,a=z,n=,r=", ",p=")
	cred := state.SCRAMCredential{User: "alice", Mechanism: state.SCRAMSHA256, Iterations: 4096,
		Salt: []byte("salt"), StoredKey: make([]byte, 32), ServerKey: make([]byte, 32)}
	lookup := func(user string) (state.SCRAMCredential, bool, error) { return cred, user == "alice", nil }
	f.Fuzz(func(t *testing.T, plainMsg []byte, first, final string) {
		if user, err := plainAuthenticate(map[string]string{"alice": "alice-pw"}, plainMsg); err == nil &&
			string(plainMsg) != "\x00alice\x00alice-pw" && string(plainMsg) != "alice\x00alice\x00alice-pw" {
			t.Fatalf("PLAIN %q authenticated as %q", plainMsg, user)
		}
		s, _, err := scramFirst(state.SCRAMSHA256, lookup, []byte("decoy"), first)
		if err != nil {
			return
		}
		// StoredKey is all zeros: no proof can hash to it.
		if _, err := s.final(final); err == nil {
			t.Fatalf("SCRAM final %q verified against an impossible key", final)
		}
	})
}
