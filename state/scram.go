package state

import (
	"encoding/binary"
	"fmt"
)

// SCRAM credentials (AlterUserScramCredentials). Only what RFC 5802's
// server needs is kept: salt, iterations, StoredKey and ServerKey. Neither
// the password nor the salted password is stored, so the data directory
// does not let anyone log in, as with Kafka's own credential records.
//
//	v1/scram/<mechanism i8><user n>  ->  version, iterations u32,
//	                                     salt s, stored key s, server key s
const keySCRAMPrefix = "v1/scram/"

// SCRAM mechanisms, with Kafka's ScramMechanism wire values.
const (
	SCRAMSHA256 int8 = 1
	SCRAMSHA512 int8 = 2
)

// SCRAMCredential is one user's credential for one mechanism.
type SCRAMCredential struct {
	User       string
	Mechanism  int8 // SCRAMSHA256 or SCRAMSHA512
	Iterations int32
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

func scramKey(mechanism int8, user string) []byte {
	k := append([]byte(keySCRAMPrefix), byte(mechanism))
	k = binary.AppendUvarint(k, uint64(len(user)))
	return append(k, user...)
}

func checkSCRAM(c SCRAMCredential) error {
	switch {
	case c.Mechanism != SCRAMSHA256 && c.Mechanism != SCRAMSHA512:
		return fmt.Errorf("unknown SCRAM mechanism %d", c.Mechanism)
	case c.User == "":
		return fmt.Errorf("empty user name")
	case c.Iterations <= 0:
		return fmt.Errorf("iterations %d", c.Iterations)
	case len(c.Salt) == 0 || len(c.StoredKey) == 0 || len(c.ServerKey) == 0:
		return fmt.Errorf("empty salt or key")
	}
	return nil
}

// PutSCRAMCredentials stores credentials, replacing a user's existing one
// for the same mechanism, and deletes the (user, mechanism) pairs of del,
// in one synced transaction.
func (s *Store) PutSCRAMCredentials(put []SCRAMCredential, del []SCRAMCredential) error {
	for _, c := range put {
		if err := checkSCRAM(c); err != nil {
			return fmt.Errorf("state: SCRAM credential of %q: %v", c.User, err)
		}
	}
	return s.update(func(txn tx) error {
		for _, c := range del {
			if err := txn.Delete(scramKey(c.Mechanism, c.User)); err != nil {
				return err
			}
		}
		for _, c := range put {
			v := []byte{formatV1}
			v = binary.BigEndian.AppendUint32(v, uint32(c.Iterations))
			v = appendString(v, string(c.Salt))
			v = appendString(v, string(c.StoredKey))
			v = appendString(v, string(c.ServerKey))
			if err := txn.Set(scramKey(c.Mechanism, c.User), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// SCRAMCredentials returns every stored credential, by mechanism then user.
func (s *Store) SCRAMCredentials() ([]SCRAMCredential, error) {
	var out []SCRAMCredential
	err := s.view(func(txn tx) error {
		out = out[:0]
		return scanPrefix(txn, keySCRAMPrefix, func(suffix string, v []byte) error {
			c, err := decodeSCRAM(suffix, v)
			if err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	return out, err
}

// SCRAMCredential looks up one user's credential; ok is false if none.
func (s *Store) SCRAMCredential(mechanism int8, user string) (c SCRAMCredential, ok bool, err error) {
	err = s.view(func(txn tx) error {
		ok, err = getRecord(txn, scramKey(mechanism, user), func(v []byte) error {
			c, err = decodeSCRAM(string(scramKey(mechanism, user)[len(keySCRAMPrefix):]), v)
			return err
		})
		return err
	})
	return c, ok, err
}

// decodeSCRAM decodes a credential from its key suffix and value.
func decodeSCRAM(suffix string, v []byte) (SCRAMCredential, error) {
	k := reader{b: []byte(suffix), what: "SCRAM credential key"}
	mech := int8(0)
	if b := k.bytes(1); b != nil {
		mech = int8(b[0])
	}
	user := k.name()
	if err := k.complete(); err != nil {
		return SCRAMCredential{}, err
	}
	r := reader{b: v, what: "SCRAM credential of " + fmt.Sprintf("%q", user)}
	r.version()
	c := SCRAMCredential{User: user, Mechanism: mech, Iterations: int32(r.u32()),
		Salt: []byte(r.str()), StoredKey: []byte(r.str()), ServerKey: []byte(r.str())}
	if err := r.complete(); err != nil {
		return SCRAMCredential{}, err
	}
	if err := checkSCRAM(c); err != nil {
		return SCRAMCredential{}, fmt.Errorf("%w: SCRAM credential of %q: %v", ErrCorrupt, user, err)
	}
	return c, nil
}
