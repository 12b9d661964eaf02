package state

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// Secrets at rest. A mirror's source credentials (the config values
// Options.IsSecret names: sasl.jaas.config, ssl.*.password...) are sealed
// before they are written, as Kafka's password encoder does for dynamic
// password configs: a data directory copied to another machine, or read
// with strings(1), does not give the credentials away without
// password.encoder.secret.
//
// The key is PBKDF2-HMAC-SHA256 of the secret with a random per-store salt
// (v1/meta/secret-salt, created on first use), computed once at Open. Each
// value is AES-256-GCM sealed with a fresh 12-byte nonce, the mirror and
// config names as associated data (a sealed value cannot be moved to
// another config), and stored as
//
//	kmirror-sealed:v1:<base64 of nonce || ciphertext || tag>
//
// Values stored in the clear by an older kmirror are read as they are and
// sealed at the mirror's next write.

const (
	sealedPrefix     = "kmirror-sealed:v1:"
	keySecretSalt    = "v1/meta/secret-salt"
	secretKDFRounds  = 600_000 // OWASP's 2023 figure for PBKDF2-HMAC-SHA256
	secretSaltLength = 16
)

// Errors of sealed values.
var (
	// ErrNoSecret: a credential was to be stored (or read) and the store
	// has no password.encoder.secret.
	ErrNoSecret = errors.New("state: a source credential needs password.encoder.secret to be stored encrypted")
	// ErrSecretMismatch: a sealed value does not open with this secret.
	ErrSecretMismatch = errors.New("state: a stored credential cannot be decrypted: password.encoder.secret differs from the one it was stored with")
)

// initSealer derives the store's sealing key when a secret is configured.
func (s *Store) initSealer(secret string, isSecret func(string) bool) error {
	s.isSecret, s.secret = isSecret, secret
	if secret == "" {
		return nil
	}
	var salt []byte
	err := s.update(func(txn tx) error {
		item, err := txn.Get([]byte(keySecretSalt))
		switch {
		case err == nil:
			salt, err = item.ValueCopy(nil)
			if err == nil && len(salt) != secretSaltLength {
				err = fmt.Errorf("%w: %s: %d bytes", ErrCorrupt, keySecretSalt, len(salt))
			}
			return err
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		salt = make([]byte, secretSaltLength)
		rand.Read(salt)
		return txn.Set([]byte(keySecretSalt), salt)
	})
	if err != nil {
		return fmt.Errorf("state: secret salt: %w", err)
	}
	key, err := pbkdf2.Key(sha256.New, secret, salt, secretKDFRounds, 32)
	if err != nil {
		return fmt.Errorf("state: deriving the secret key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return err
	}
	s.aead, err = cipher.NewGCM(block)
	return err
}

// sealConfigs returns configs with the secret values sealed; configs
// itself is not changed.
func (s *Store) sealConfigs(mirror string, configs map[string]string) (map[string]string, error) {
	var out map[string]string
	for k, v := range configs {
		if s.isSecret == nil || !s.isSecret(k) || v == "" || strings.HasPrefix(v, sealedPrefix) {
			continue
		}
		if s.aead == nil {
			return nil, fmt.Errorf("%w: mirror %s, config %s", ErrNoSecret, mirror, k)
		}
		if out == nil {
			out = maps.Clone(configs)
		}
		nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(v)+s.aead.Overhead())
		rand.Read(nonce)
		sealed := s.aead.Seal(nonce, nonce, []byte(v), sealAD(mirror, k))
		out[k] = sealedPrefix + base64.StdEncoding.EncodeToString(sealed)
	}
	if out == nil {
		return configs, nil
	}
	return out, nil
}

// openConfigs opens the sealed values of configs in place. Errors name the
// mirror and config, never a value.
func (s *Store) openConfigs(mirror string, configs map[string]string) error {
	for k, v := range configs {
		enc, ok := strings.CutPrefix(v, sealedPrefix)
		if !ok {
			continue
		}
		if s.aead == nil {
			return fmt.Errorf("%w: mirror %s, config %s is stored encrypted", ErrNoSecret, mirror, k)
		}
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(raw) < s.aead.NonceSize() {
			return fmt.Errorf("%w: mirror %s, config %s: malformed sealed value", ErrCorrupt, mirror, k)
		}
		n := s.aead.NonceSize()
		plain, err := s.aead.Open(nil, raw[:n], raw[n:], sealAD(mirror, k))
		if err != nil {
			return fmt.Errorf("%w: mirror %s, config %s", ErrSecretMismatch, mirror, k)
		}
		configs[k] = string(plain)
	}
	return nil
}

func sealAD(mirror, config string) []byte { return []byte("mirror\x00" + mirror + "\x00" + config) }
