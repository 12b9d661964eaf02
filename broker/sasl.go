package broker

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/state"
)

// Server side of SASL (KIP-43, KIP-152): a SASL_PLAINTEXT or SASL_SSL
// listener serves ApiVersions, SaslHandshake and SaslAuthenticate only,
// until the connection has authenticated; then the connection's principal
// is "User:<name>". PLAIN checks the users of the PlainLoginModule JAAS
// config (server.properties); SCRAM-SHA-256/512 (RFC 5802, RFC 7677)
// checks the credentials stored with AlterUserScramCredentials.

// Kafka's SASL limits: sasl.server.max.receive.size bounds what an
// unauthenticated connection may send in one request, and a failed
// authentication is answered only after connection.failed.authentication.
// delay.ms, which slows password guessing.
const (
	saslMaxReceiveSize        = 524288
	failedAuthenticationDelay = 100 // ms
)

// saslState is a connection's SASL progress (in connScratch).
type saslState struct {
	mechanism     string // chosen by SaslHandshake
	authenticated bool
	failed        bool // a failed attempt: the next request closes the connection
	scram         *scramServer
}

// saslRequestAllowed reports whether a request may be served on an
// unauthenticated SASL connection.
func saslRequestAllowed(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// errAuthentication is a failed authentication as clients are told.
var errAuthentication = errors.New("Authentication failed: Invalid username or password")

// plainAuthenticate checks a PLAIN message: [authzid] NUL user NUL password.
// It returns the user.
func plainAuthenticate(users map[string]string, msg []byte) (string, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", errors.New("Invalid SASL/PLAIN response: expected 3 tokens")
	}
	authz, user, pass := string(parts[0]), string(parts[1]), parts[2]
	if user == "" {
		return "", errors.New("Authentication failed: username not specified")
	}
	if authz != "" && authz != user {
		return "", errors.New("Authentication failed: Client requested an authorization id that is different from username")
	}
	want, ok := users[user]
	// Compared even for unknown users, so timing does not tell which
	// user names exist.
	if subtle.ConstantTimeCompare([]byte(want), pass) != 1 || !ok {
		return "", errAuthentication
	}
	return user, nil
}

// scramHash is a SCRAM mechanism's hash.
func scramHash(mechanism int8) func() hash.Hash {
	if mechanism == state.SCRAMSHA512 {
		return sha512.New
	}
	return sha256.New
}

func scramMechanism(name string) (int8, bool) {
	switch name {
	case "SCRAM-SHA-256":
		return state.SCRAMSHA256, true
	case "SCRAM-SHA-512":
		return state.SCRAMSHA512, true
	}
	return 0, false
}

func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

func hashSum(h func() hash.Hash, b []byte) []byte {
	x := h()
	x.Write(b)
	return x.Sum(nil)
}

// scramKeys derives StoredKey and ServerKey from a salted password, as
// AlterUserScramCredentials gives it (RFC 5802 section 3).
func scramKeys(mechanism int8, saltedPassword []byte) (storedKey, serverKey []byte) {
	h := scramHash(mechanism)
	clientKey := hmacSum(h, saltedPassword, []byte("Client Key"))
	return hashSum(h, clientKey), hmacSum(h, saltedPassword, []byte("Server Key"))
}

// scramServer is one SCRAM exchange: client-first, then client-final.
type scramServer struct {
	mechanism int8
	cred      state.SCRAMCredential
	known     bool // cred is a real user's; else a decoy that never verifies
	user      string
	gs2Header string
	nonce     string
	authMsg   string // client-first-bare + "," + server-first
}

// scramFirst handles the client-first message and returns server-first.
// An unknown user gets a decoy answer (a salt derived from the name), so
// the exchange does not tell which users exist; it fails at the proof.
func scramFirst(mechanism int8, lookup func(user string) (state.SCRAMCredential, bool, error), decoyKey []byte, msg string) (*scramServer, string, error) {
	gs2, bare, ok := splitGS2(msg)
	if !ok {
		return nil, "", errors.New("invalid SCRAM client-first message")
	}
	var user, cnonce string
	for _, attr := range strings.Split(bare, ",") {
		switch {
		case strings.HasPrefix(attr, "n="):
			user = strings.NewReplacer("=2C", ",", "=3D", "=").Replace(attr[2:])
		case strings.HasPrefix(attr, "r="):
			cnonce = attr[2:]
		case strings.HasPrefix(attr, "m="):
			return nil, "", errors.New("SCRAM mandatory extensions are not supported")
		}
	}
	if user == "" || cnonce == "" {
		return nil, "", errors.New("invalid SCRAM client-first message: missing user or nonce")
	}
	cred, known, err := lookup(user)
	if err != nil {
		return nil, "", err
	}
	if !known {
		h := scramHash(mechanism)
		cred = state.SCRAMCredential{User: user, Mechanism: mechanism, Iterations: 4096,
			Salt: hmacSum(h, decoyKey, []byte(user))[:16]}
	}
	snonce := make([]byte, 18)
	rand.Read(snonce)
	s := &scramServer{mechanism: mechanism, cred: cred, known: known, user: user, gs2Header: gs2,
		nonce: cnonce + base64.RawStdEncoding.EncodeToString(snonce)}
	first := "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
	s.authMsg = bare + "," + first
	return s, first, nil
}

// splitGS2 splits "n,,n=user,r=nonce" into its GS2 header ("n,,") and the
// client-first-bare part. Channel binding is not offered ("p=" refused).
func splitGS2(msg string) (header, bare string, ok bool) {
	if !strings.HasPrefix(msg, "n,") && !strings.HasPrefix(msg, "y,") {
		return "", "", false
	}
	i := strings.IndexByte(msg[2:], ',')
	if i < 0 {
		return "", "", false
	}
	cut := 2 + i + 1
	return msg[:cut], msg[cut:], true
}

// final checks client-final and returns server-final.
func (s *scramServer) final(msg string) (string, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return "", errors.New("invalid SCRAM client-final message: no proof")
	}
	withoutProof, proof64 := msg[:i], msg[i+3:]
	var binding, nonce string
	for _, attr := range strings.Split(withoutProof, ",") {
		switch {
		case strings.HasPrefix(attr, "c="):
			binding = attr[2:]
		case strings.HasPrefix(attr, "r="):
			nonce = attr[2:]
		}
	}
	if binding != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return "", errors.New("invalid SCRAM client-final message: channel binding mismatch")
	}
	// Kafka checks that the nonce ends with the server's (not that it
	// equals it): librdkafka (2.0) sends its own nonce before the
	// combined one, and Kafka accepts that.
	if !strings.HasSuffix(nonce, s.nonce) {
		return "", errors.New("invalid SCRAM client-final message: nonce mismatch")
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	if err != nil {
		return "", errors.New("invalid SCRAM client-final message: bad proof encoding")
	}
	authMsg := []byte(s.authMsg + "," + withoutProof)
	h := scramHash(s.mechanism)
	sig := hmacSum(h, s.cred.StoredKey, authMsg)
	if !s.known || len(proof) != len(sig) {
		return "", errAuthentication
	}
	clientKey := make([]byte, len(sig))
	for i := range sig {
		clientKey[i] = proof[i] ^ sig[i]
	}
	if subtle.ConstantTimeCompare(hashSum(h, clientKey), s.cred.StoredKey) != 1 {
		return "", errAuthentication
	}
	return "v=" + base64.StdEncoding.EncodeToString(hmacSum(h, s.cred.ServerKey, authMsg)), nil
}

// listenerProtocol is the security protocol of the named listener.
func (b *Broker) listenerProtocol(name string) string {
	for _, l := range b.cfg.Listeners {
		if l.Name == name {
			if l.Protocol == "" {
				return "PLAINTEXT"
			}
			return l.Protocol
		}
	}
	return "PLAINTEXT"
}

// mechanismEnabled reports whether a SASL mechanism is offered.
func (b *Broker) mechanismEnabled(m string) bool {
	for _, e := range b.cfg.Security.SASLMechanisms {
		if e == m {
			return m != "PLAIN" || len(b.cfg.Security.PlainUsers) > 0
		}
	}
	return false
}

// saslGate checks a request on a SASL listener before it is served: before
// authentication only the SASL exchange is allowed, within Kafka's size
// bound; after a failed attempt the connection is closed.
func (b *Broker) saslGate(cs *connScratch, key int16, bodyLen int) error {
	switch {
	case cs.sasl.failed:
		return errors.New("request after a failed SASL authentication")
	case cs.sasl.authenticated:
		return nil
	case !saslRequestAllowed(key):
		return fmt.Errorf("unexpected Kafka request of type %s during SASL authentication", nameForKey(key))
	case bodyLen > saslMaxReceiveSize:
		return fmt.Errorf("SASL request of %d bytes before authentication (limit %d)", bodyLen, saslMaxReceiveSize)
	}
	return nil
}
