// Package testcerts makes throwaway certificate authorities and
// certificates for tests of TLS listeners and TLS sources: ECDSA P-256,
// valid for an hour around now, written as PEM where a test needs files
// (kcat, server.properties).
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	t    testing.TB
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate.
	PEM []byte
	// Pool trusts the CA.
	Pool   *x509.CertPool
	serial int64
}

// NewCA makes a CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kmirror test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{t: t, cert: cert, key: key, Pool: pool, serial: 1,
		PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Cert is a certificate and its key.
type Cert struct {
	TLS tls.Certificate
	// CertPEM and KeyPEM are the certificate and the unencrypted key.
	CertPEM, KeyPEM []byte
}

// Server issues a certificate for 127.0.0.1 and localhost.
func (ca *CA) Server() Cert {
	return ca.issue(pkix.Name{CommonName: "localhost"}, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate with the given subject.
func (ca *CA) Client(subject pkix.Name) Cert { return ca.issue(subject, x509.ExtKeyUsageClientAuth) }

func (ca *CA) issue(subject pkix.Name, usage x509.ExtKeyUsage) Cert {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		ca.t.Fatal(err)
	}
	return Cert{TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
}

// WriteFile writes data to name in a test temp dir and returns the path.
func WriteFile(t testing.TB, name string, data ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	var all []byte
	for _, d := range data {
		all = append(all, d...)
	}
	if err := os.WriteFile(path, all, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
