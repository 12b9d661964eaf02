package state

import (
	"bytes"
	"errors"
	"testing"
)

// SCRAM credentials round-trip, replace, delete and survive a restart.
func TestSCRAMCredentials(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	alice := SCRAMCredential{User: "alice", Mechanism: SCRAMSHA256, Iterations: 4096, Salt: []byte("s1"),
		StoredKey: []byte("k1"), ServerKey: []byte("v1")}
	bob := SCRAMCredential{User: "bob", Mechanism: SCRAMSHA512, Iterations: 8192, Salt: []byte("s2"),
		StoredKey: []byte("k2"), ServerKey: []byte("v2")}
	if err := s.PutSCRAMCredentials([]SCRAMCredential{alice, bob}, nil); err != nil {
		t.Fatal(err)
	}
	alice.Iterations, alice.Salt = 5000, []byte("s3")
	if err := s.PutSCRAMCredentials([]SCRAMCredential{alice}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, ok, err := s.SCRAMCredential(SCRAMSHA256, "alice")
	if err != nil || !ok || got.Iterations != 5000 || !bytes.Equal(got.Salt, []byte("s3")) {
		t.Fatalf("alice after a replace and a restart: %+v %v %v", got, ok, err)
	}
	if _, ok, _ := s.SCRAMCredential(SCRAMSHA512, "alice"); ok {
		t.Fatal("alice has a SHA-512 credential she was never given")
	}
	if err := s.PutSCRAMCredentials(nil, []SCRAMCredential{{User: "bob", Mechanism: SCRAMSHA512}}); err != nil {
		t.Fatal(err)
	}
	all, err := s.SCRAMCredentials()
	if err != nil || len(all) != 1 || all[0].User != "alice" {
		t.Fatalf("after deleting bob: %+v %v", all, err)
	}
	if err := s.PutSCRAMCredentials([]SCRAMCredential{{User: "x", Mechanism: 7, Iterations: 1,
		Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("v")}}, nil); err == nil {
		t.Fatal("an unknown mechanism was stored")
	}
}

// A damaged record is reported as corrupt, never as a credential.
func TestSCRAMCorrupt(t *testing.T) {
	t.Parallel()
	key := string(scramKey(SCRAMSHA256, "alice")[len(keySCRAMPrefix):])
	for _, v := range [][]byte{nil, {formatV1}, {2, 0, 0, 16, 0}, {formatV1, 0, 0, 16, 0, 0, 0, 0, 9}} {
		if _, err := decodeSCRAM(key, v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("value % x: %v, want ErrCorrupt", v, err)
		}
	}
}
