package state

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func isCredential(name string) bool { return name == "sasl.jaas.config" }

const testPassword = "Tr0ub4dor&3-never-on-disk"

func credentialMirror() Mirror {
	return Mirror{Name: "dr", Configs: map[string]string{"bootstrap.servers": "src:9092",
		"sasl.jaas.config": `ScramLoginModule required username="mirror" password="` + testPassword + `";`},
		Topics: map[string]PartitionState{}}
}

// A credential is sealed on disk and opened on read with the same secret;
// the data directory never holds it in the clear, and other configs are
// unchanged.
func TestSecretsSealedAtRest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{Secret: "encoder-secret", IsSecret: isCredential})
	if err != nil {
		t.Fatal(err)
	}
	want := credentialMirror()
	if err := s.PutMirror(want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetMirror("dr")
	if err != nil || got.Configs["sasl.jaas.config"] != want.Configs["sasl.jaas.config"] ||
		got.Configs["bootstrap.servers"] != "src:9092" {
		t.Fatalf("read back %+v, %v", got.Configs, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(testPassword)) {
			t.Errorf("%s holds the password in the clear", path)
		}
		return nil
	})

	// The same secret opens it after a restart.
	s, err = Open(dir, Options{Secret: "encoder-secret", IsSecret: isCredential})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := s.Mirrors()
	if err != nil || len(ms) != 1 || ms[0].Configs["sasl.jaas.config"] != want.Configs["sasl.jaas.config"] {
		t.Fatalf("after a restart: %+v %v", ms, err)
	}
	s.Close()

	// A copy opened with another secret, or none, gives errors that say so
	// and never the credential.
	for _, secret := range []string{"another-secret", ""} {
		s, err := Open(dir, Options{Secret: secret, IsSecret: isCredential})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.GetMirror("dr")
		wantErr := ErrSecretMismatch
		if secret == "" {
			wantErr = ErrNoSecret
		}
		if !errors.Is(err, wantErr) || strings.Contains(err.Error(), testPassword) {
			t.Errorf("secret %q: GetMirror error %v, want %v without the password", secret, err, wantErr)
		}
		if _, err := s.Mirrors(); !errors.Is(err, wantErr) {
			t.Errorf("secret %q: Mirrors error %v, want %v", secret, err, wantErr)
		}
		s.Close()
	}
}

// Without a secret a credential cannot be stored at all.
func TestSecretsNeedASecret(t *testing.T) {
	t.Parallel()
	s, err := Open("", Options{InMemory: true, IsSecret: isCredential})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutMirror(credentialMirror()); !errors.Is(err, ErrNoSecret) {
		t.Fatalf("PutMirror without a secret: %v, want ErrNoSecret", err)
	}
	plain := credentialMirror()
	delete(plain.Configs, "sasl.jaas.config")
	if err := s.PutMirror(plain); err != nil {
		t.Fatalf("a mirror without credentials: %v", err)
	}
}

// A sealed value is bound to its mirror and config: copied to another
// mirror's record it does not open.
func TestSecretsBoundToTheirPlace(t *testing.T) {
	t.Parallel()
	s, err := Open("", Options{InMemory: true, Secret: "x", IsSecret: isCredential})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sealed, err := s.sealConfigs("dr", map[string]string{"sasl.jaas.config": "secret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.openConfigs("other", sealed); !errors.Is(err, ErrSecretMismatch) {
		t.Fatalf("a sealed value moved to another mirror opened: %v", err)
	}
}
