package clientauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// secret is the password in every test input. No error may contain it.
const secret = "Hunter2-s3cret"

const (
	plainModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

func TestParseJAAS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		in     string
		module string
		opts   map[string]string
	}{
		{
			name:   "plain",
			in:     plainModule + ` required username="alice" password="` + secret + `";`,
			module: plainModule,
			opts:   map[string]string{"username": "alice", "password": secret},
		},
		{
			name:   "scram",
			in:     scramModule + ` required username="alice" password="` + secret + `";`,
			module: scramModule,
			opts:   map[string]string{"username": "alice", "password": secret},
		},
		{
			name:   "escaped quote and backslash",
			in:     scramModule + ` required username="al\"ice" password="a\\b\"c\\";`,
			module: scramModule,
			opts:   map[string]string{"username": `al"ice`, "password": `a\b"c\`},
		},
		{
			name:   "equals semicolon and spaces inside quotes",
			in:     scramModule + ` required username="a b" password="s3cr=t; x=y ;";`,
			module: scramModule,
			opts:   map[string]string{"username": "a b", "password": "s3cr=t; x=y ;"},
		},
		{
			name:   "empty quoted value",
			in:     plainModule + ` required username="alice" password="";`,
			module: plainModule,
			opts:   map[string]string{"username": "alice", "password": ""},
		},
		{
			name:   "non-ASCII quoted value",
			in:     plainModule + " required username=\"alice\" password=\"p\xc3\xa4ss\";",
			module: plainModule,
			opts:   map[string]string{"username": "alice", "password": "p\xc3\xa4ss"},
		},
		{
			name:   "bare words",
			in:     plainModule + ` required username=alice password=a-b_c.d$e:f@g+h!9#;`,
			module: plainModule,
			opts:   map[string]string{"username": "alice", "password": "a-b_c.d$e:f@g+h!9#"},
		},
		{
			name:   "extra whitespace and newlines",
			in:     "\n\t  " + plainModule + " \r\n required\n\tusername = \"alice\"\n\n password=\t\"" + secret + "\"  \n ; \n\t",
			module: plainModule,
			opts:   map[string]string{"username": "alice", "password": secret},
		},
		{
			name:   "no space before semicolon",
			in:     plainModule + ` required username=alice;`,
			module: plainModule,
			opts:   map[string]string{"username": "alice"},
		},
		{
			name:   "no options",
			in:     plainModule + ` required;`,
			module: plainModule,
			opts:   map[string]string{},
		},
		{
			name:   "flag requisite",
			in:     plainModule + ` requisite username="alice";`,
			module: plainModule,
			opts:   map[string]string{"username": "alice"},
		},
		{
			name:   "flag sufficient",
			in:     plainModule + ` sufficient username="alice";`,
			module: plainModule,
			opts:   map[string]string{"username": "alice"},
		},
		{
			name:   "flag optional",
			in:     plainModule + ` optional username="alice";`,
			module: plainModule,
			opts:   map[string]string{"username": "alice"},
		},
		{
			name:   "flag upper case",
			in:     plainModule + ` REQUIRED username="alice";`,
			module: plainModule,
			opts:   map[string]string{"username": "alice"},
		},
		{
			name:   "flag mixed case",
			in:     plainModule + ` Optional username="alice";`,
			module: plainModule,
			opts:   map[string]string{"username": "alice"},
		},
		{
			name:   "tokenauth quoted",
			in:     scramModule + ` required username="tokenid" password="hmac" tokenauth="true";`,
			module: scramModule,
			opts:   map[string]string{"username": "tokenid", "password": "hmac", "tokenauth": "true"},
		},
		{
			name:   "tokenauth bare",
			in:     scramModule + ` required username="tokenid" password="hmac" tokenauth=true;`,
			module: scramModule,
			opts:   map[string]string{"username": "tokenid", "password": "hmac", "tokenauth": "true"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			module, opts, err := ParseJAAS(tc.in)
			if err != nil {
				t.Fatalf("ParseJAAS(%q): %v", tc.in, err)
			}
			if module != tc.module {
				t.Errorf("module = %q, want %q", module, tc.module)
			}
			if !maps.Equal(opts, tc.opts) {
				t.Errorf("options = %q, want %q", opts, tc.opts)
			}
		})
	}
}

func TestParseJAASInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"empty string", ""},
		{"only whitespace", " \n\t "},
		{"only the module", plainModule},
		{"only the module and semicolon", plainModule + ";"},
		{"missing flag", plainModule + ` username="alice" password="` + secret + `";`},
		{"unknown flag", plainModule + ` mandatory username="alice" password="` + secret + `";`},
		{"missing semicolon", plainModule + ` required username="alice" password="` + secret + `"`},
		{"missing semicolon after bare value", plainModule + ` required username="alice" password=` + secret},
		{"unterminated quote", plainModule + ` required username="alice" password="` + secret + `;`},
		{"unterminated quote after backslash", plainModule + ` required username="alice" password="` + secret + `\`},
		{"escaped closing quote", plainModule + ` required username="alice" password="` + secret + `\";`},
		{"key without value", plainModule + ` required username= ;`},
		{"key without value before semicolon", plainModule + ` required password=;`},
		{"key without equals", plainModule + ` required username password="` + secret + `";`},
		{"key at end", plainModule + ` required username`},
		{"duplicate option", plainModule + ` required username="alice" password="` + secret + `" username="bob";`},
		{"duplicate password", plainModule + ` required username="alice" password="` + secret + `" password="` + secret + `";`},
		{"two login modules", plainModule + ` required username="alice" password="` + secret + `"; ` + scramModule + ` required username="bob" password="` + secret + `";`},
		{"text after semicolon", plainModule + ` required username="alice" password="` + secret + `"; extra`},
		{"quoted module", `"` + plainModule + `" required username="alice" password="` + secret + `";`},
		{"quoted flag", plainModule + ` "required" username="alice" password="` + secret + `";`},
		{"bad byte in key", plainModule + ` required user/name="alice" password="` + secret + `";`},
		{"quoted key", plainModule + ` required "username"="alice" password="` + secret + `";`},
		{"double equals", plainModule + ` required username=="alice" password="` + secret + `";`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			module, opts, err := ParseJAAS(tc.in)
			if err == nil {
				t.Fatalf("ParseJAAS(%q) = %q, %q; want an error", tc.in, module, opts)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q contains the password", err)
			}
			if module != "" || opts != nil {
				t.Errorf("on error got module %q and options %q, want zero values", module, opts)
			}
		})
	}
}

// jaas builds a sasl.jaas.config value with username alice and the test
// password.
func jaas(module string, extra ...string) string {
	s := module + ` required username="alice" password="` + secret + `"`
	for _, e := range extra {
		s += " " + e
	}
	return s + ";"
}

func TestParseProtocols(t *testing.T) {
	t.Parallel()
	sasl := jaas(plainModule)
	for _, tc := range []struct {
		name     string
		configs  map[string]string
		protocol string
		tls      bool
		sasl     bool
		nopts    int
	}{
		{"empty config is PLAINTEXT", nil, "PLAINTEXT", false, false, 0},
		{"empty protocol is PLAINTEXT", map[string]string{"security.protocol": ""}, "PLAINTEXT", false, false, 0},
		{"PLAINTEXT", map[string]string{"security.protocol": "PLAINTEXT"}, "PLAINTEXT", false, false, 0},
		{"SSL", map[string]string{"security.protocol": "SSL"}, "SSL", true, false, 1},
		{"SASL_PLAINTEXT", map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": sasl}, "SASL_PLAINTEXT", false, true, 1},
		{"SASL_SSL", map[string]string{"security.protocol": "SASL_SSL", "sasl.jaas.config": sasl}, "SASL_SSL", true, true, 2},
		{"lower case plaintext", map[string]string{"security.protocol": "plaintext"}, "PLAINTEXT", false, false, 0},
		{"lower case ssl", map[string]string{"security.protocol": "ssl"}, "SSL", true, false, 1},
		{"mixed case sasl_plaintext", map[string]string{"security.protocol": "Sasl_Plaintext", "sasl.jaas.config": sasl}, "SASL_PLAINTEXT", false, true, 1},
		{"lower case sasl_ssl with spaces", map[string]string{"security.protocol": " sasl_ssl ", "sasl.jaas.config": sasl}, "SASL_SSL", true, true, 2},
		{"sasl settings ignored without SASL", map[string]string{"security.protocol": "SSL", "sasl.mechanism": "SCRAM-SHA-512"}, "SSL", true, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tc.configs)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if s.Protocol != tc.protocol {
				t.Errorf("Protocol = %q, want %q", s.Protocol, tc.protocol)
			}
			if (s.TLS != nil) != tc.tls {
				t.Errorf("TLS = %v, want set: %v", s.TLS, tc.tls)
			}
			if s.TLS != nil && s.TLS.MinVersion < tls.VersionTLS12 {
				t.Errorf("TLS MinVersion = %#x, want at least TLS 1.2", s.TLS.MinVersion)
			}
			if (s.SASL != nil) != tc.sasl {
				t.Errorf("SASL = %v, want set: %v", s.SASL, tc.sasl)
			}
			if got := len(s.KgoOpts()); got != tc.nopts {
				t.Errorf("len(KgoOpts()) = %d, want %d", got, tc.nopts)
			}
		})
	}
}

func TestParseSASLMechanisms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		mechanism string // sasl.mechanism; "-" leaves it unset
		jaas      string
		wantName  string
		// wantFirst checks the mechanism's first client message, proving
		// the credentials (and tokenauth) reached it.
		wantFirst func(msg string) bool
	}{
		{
			name: "default is PLAIN", mechanism: "-", jaas: jaas(plainModule), wantName: "PLAIN",
			wantFirst: func(m string) bool { return m == "\x00alice\x00"+secret },
		},
		{
			name: "PLAIN", mechanism: "PLAIN", jaas: jaas(plainModule), wantName: "PLAIN",
			wantFirst: func(m string) bool { return m == "\x00alice\x00"+secret },
		},
		{
			name: "plain lower case", mechanism: "plain", jaas: jaas(plainModule), wantName: "PLAIN",
			wantFirst: func(m string) bool { return m == "\x00alice\x00"+secret },
		},
		{
			name: "empty mechanism is PLAIN", mechanism: "", jaas: jaas(plainModule), wantName: "PLAIN",
			wantFirst: func(m string) bool { return m == "\x00alice\x00"+secret },
		},
		{
			name: "SCRAM-SHA-256", mechanism: "SCRAM-SHA-256", jaas: jaas(scramModule), wantName: "SCRAM-SHA-256",
			wantFirst: func(m string) bool {
				return strings.HasPrefix(m, "n,,n=alice,r=") && !strings.Contains(m, "tokenauth")
			},
		},
		{
			name: "SCRAM-SHA-512", mechanism: "SCRAM-SHA-512", jaas: jaas(scramModule), wantName: "SCRAM-SHA-512",
			wantFirst: func(m string) bool {
				return strings.HasPrefix(m, "n,,n=alice,r=") && !strings.Contains(m, "tokenauth")
			},
		},
		{
			name: "scram lower case", mechanism: " scram-sha-512 ", jaas: jaas(scramModule), wantName: "SCRAM-SHA-512",
			wantFirst: func(m string) bool { return strings.HasPrefix(m, "n,,n=alice,r=") },
		},
		{
			name: "SCRAM tokenauth", mechanism: "SCRAM-SHA-256", jaas: jaas(scramModule, `tokenauth="true"`), wantName: "SCRAM-SHA-256",
			wantFirst: func(m string) bool {
				return strings.HasPrefix(m, "n,,n=alice,r=") && strings.HasSuffix(m, ",tokenauth=true")
			},
		},
		{
			name: "SCRAM tokenauth upper case", mechanism: "SCRAM-SHA-512", jaas: jaas(scramModule, `tokenauth=TRUE`), wantName: "SCRAM-SHA-512",
			wantFirst: func(m string) bool { return strings.HasSuffix(m, ",tokenauth=true") },
		},
		{
			name: "SCRAM tokenauth false", mechanism: "SCRAM-SHA-512", jaas: jaas(scramModule, `tokenauth="false"`), wantName: "SCRAM-SHA-512",
			wantFirst: func(m string) bool { return !strings.Contains(m, "tokenauth") },
		},
		{
			name: "short module name", mechanism: "PLAIN", jaas: jaas("PlainLoginModule"), wantName: "PLAIN",
			wantFirst: func(m string) bool { return m == "\x00alice\x00"+secret },
		},
	} {
		for _, protocol := range []string{"SASL_PLAINTEXT", "SASL_SSL"} {
			t.Run(tc.name+"/"+protocol, func(t *testing.T) {
				t.Parallel()
				configs := map[string]string{"security.protocol": protocol, "sasl.jaas.config": tc.jaas}
				if tc.mechanism != "-" {
					configs["sasl.mechanism"] = tc.mechanism
				}
				s, err := Parse(configs)
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if s.SASL == nil {
					t.Fatal("SASL is nil")
				}
				if got := s.SASL.Name(); got != tc.wantName {
					t.Errorf("Name() = %q, want %q", got, tc.wantName)
				}
				_, first, err := s.SASL.Authenticate(ctx, "localhost")
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if !tc.wantFirst(string(first)) {
					t.Errorf("first client message %q is not the expected one", first)
				}
			})
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		configs map[string]string
		setting string // the error must name it
	}{
		{"unknown protocol", map[string]string{"security.protocol": "TLS"}, "security.protocol"},
		{"protocol typo", map[string]string{"security.protocol": "SASL-SSL", "sasl.jaas.config": jaas(plainModule)}, "security.protocol"},
		{"unknown mechanism", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": jaas(plainModule)}, "sasl.mechanism"},
		{"unsupported OAUTHBEARER", map[string]string{
			"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
			"sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required username=\"alice\";",
		}, "sasl.mechanism"},
		{"SCRAM-SHA-1", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-1", "sasl.jaas.config": jaas(scramModule)}, "sasl.mechanism"},
		{"missing jaas", map[string]string{"security.protocol": "SASL_PLAINTEXT"}, "sasl.jaas.config"},
		{"missing jaas SASL_SSL", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256"}, "sasl.jaas.config"},
		{"blank jaas", map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": " \n "}, "sasl.jaas.config"},
		{"jaas syntax", map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": plainModule + ` required username="alice" password="` + secret + `"`}, "sasl.jaas.config"},
		{"jaas unterminated", map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": plainModule + ` required username="alice" password="` + secret + `;`}, "sasl.jaas.config"},
		{"missing username", map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": plainModule + ` required password="` + secret + `";`}, "sasl.jaas.config"},
		{"empty username", map[string]string{"security.protocol": "SASL_SSL", "sasl.jaas.config": plainModule + ` required username="" password="` + secret + `";`}, "sasl.jaas.config"},
		{"PLAIN with ScramLoginModule", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas(scramModule)}, "sasl.jaas.config"},
		{"default PLAIN with ScramLoginModule", map[string]string{"security.protocol": "SASL_SSL", "sasl.jaas.config": jaas(scramModule)}, "sasl.jaas.config"},
		{"SCRAM-SHA-256 with PlainLoginModule", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas(plainModule)}, "sasl.jaas.config"},
		{"SCRAM-SHA-512 with other module", map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas("com.example.ScramLoginModuleX")}, "sasl.jaas.config"},
		{"jaas with PLAINTEXT", map[string]string{"security.protocol": "PLAINTEXT", "sasl.jaas.config": jaas(plainModule)}, "sasl.jaas.config"},
		{"jaas with default PLAINTEXT", map[string]string{"sasl.jaas.config": jaas(plainModule)}, "sasl.jaas.config"},
		{"jaas with SSL", map[string]string{"security.protocol": "SSL", "sasl.jaas.config": jaas(plainModule)}, "sasl.jaas.config"},
		{"truststore type JKS", map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "ssl.truststore.type"},
		{"truststore type PKCS12", map[string]string{"security.protocol": "SASL_SSL", "sasl.jaas.config": jaas(plainModule), "ssl.truststore.type": "PKCS12"}, "ssl.truststore.type"},
		{"keystore type JKS", map[string]string{"security.protocol": "SSL", "ssl.keystore.type": "JKS"}, "ssl.keystore.type"},
		{"keystore type PKCS12", map[string]string{"security.protocol": "SSL", "ssl.keystore.type": "PKCS12"}, "ssl.keystore.type"},
		{"endpoint identification unknown", map[string]string{"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"}, "ssl.endpoint.identification.algorithm"},
		{"key password", map[string]string{"security.protocol": "SSL", "ssl.key.password": secret}, "ssl.key.password"},
		{"key without chain", map[string]string{"security.protocol": "SSL", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}, "ssl.keystore.key"},
		{"truststore not PEM", map[string]string{"security.protocol": "SSL", "ssl.truststore.certificates": "not a certificate"}, "ssl.truststore"},
		{"truststore file missing", map[string]string{"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/kmirror-ca.pem"}, "ssl.truststore.location"},
		{"keystore file missing", map[string]string{"security.protocol": "SSL", "ssl.keystore.location": "/nonexistent/kmirror-client.pem"}, "ssl.keystore.location"},
		{"both truststores", map[string]string{"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem", "ssl.truststore.certificates": "x"}, "ssl.truststore.location"},
		{"both keystores", map[string]string{"security.protocol": "SSL", "ssl.keystore.location": "/nonexistent/k.pem", "ssl.keystore.certificate.chain": "x"}, "ssl.keystore.location"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tc.configs)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", tc.configs, s)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.setting) {
				t.Errorf("error %q does not name %s", msg, tc.setting)
			}
			if strings.Contains(msg, secret) {
				t.Errorf("error %q contains the password", msg)
			}
		})
	}
}

func TestSensitive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"sasl.jaas.config", true},
		{"ssl.key.password", true},
		{"ssl.keystore.password", false},
		{"ssl.truststore.password", false}, // JKS only: refused, never stored
		{"ssl.keystore.key", true},
		{"security.protocol", false},
		{"sasl.mechanism", false},
		{"ssl.truststore.type", false},
		{"ssl.truststore.location", false},
		{"ssl.truststore.certificates", false},
		{"ssl.keystore.type", false},
		{"ssl.keystore.location", false},
		{"ssl.keystore.certificate.chain", false},
		{"ssl.endpoint.identification.algorithm", false},
		{"ssl.protocol", false},
		{"ssl.enabled.protocols", false},
		{"bootstrap.servers", false},
		{"", false},
	} {
		if got := Sensitive(tc.name); got != tc.want {
			t.Errorf("Sensitive(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIsKey(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, k := range Keys {
		if seen[k] {
			t.Errorf("Keys lists %q twice", k)
		}
		seen[k] = true
		if !IsKey(k) {
			t.Errorf("IsKey(%q) = false for a member of Keys", k)
		}
	}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"security.protocol", true},
		{"sasl.mechanism", true},
		{"sasl.jaas.config", true},
		{"ssl.truststore.location", true},
		{"ssl.truststore.certificates", true},
		{"ssl.keystore.location", true},
		{"ssl.keystore.certificate.chain", true},
		{"ssl.keystore.key", true},
		{"ssl.key.password", true},
		{"ssl.endpoint.identification.algorithm", true},
		{"sasl.kerberos.service.name", false},
		{"sasl.login.callback.handler.class", false},
		{"ssl.cipher.suites", false},
		{"ssl.keystore.type ", false},
		{"SECURITY.PROTOCOL", false},
		{"bootstrap.servers", false},
		{"", false},
	} {
		if got := IsKey(tc.name); got != tc.want {
			t.Errorf("IsKey(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	// A secret setting that is not a key would be refused before it could
	// be hidden; every sensitive name must be one of Keys.
	for _, k := range []string{"sasl.jaas.config", "ssl.key.password", "ssl.keystore.key"} {
		if !IsKey(k) || !Sensitive(k) {
			t.Errorf("%s: IsKey = %v, Sensitive = %v; want both", k, IsKey(k), Sensitive(k))
		}
	}
}

// testPKI is a CA with a server and a client certificate, plus an unrelated
// CA, all ECDSA P-256 valid for an hour either side of now.
type testPKI struct {
	caPEM      []byte // the CA certificate
	otherCAPEM []byte // a CA that signed nothing here
	caPool     *x509.CertPool

	server tls.Certificate // SAN DNS:localhost only (no IP SAN)

	clientCertPEM []byte // the client leaf, signed by the CA
	clientKeyPEM  []byte // PKCS#8 "PRIVATE KEY"
	serverKeyPEM  []byte // a key that does not match clientCertPEM
}

var loadPKI = sync.OnceValues(newTestPKI)

func pki(t *testing.T) *testPKI {
	t.Helper()
	p, err := loadPKI()
	if err != nil {
		t.Fatalf("generating test certificates: %v", err)
	}
	return p
}

func newTestPKI() (*testPKI, error) {
	now := time.Now()
	serial := int64(0)
	template := func(cn string) *x509.Certificate {
		serial++
		return &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(time.Hour),
		}
	}
	newKey := func() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }
	pemCert := func(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }
	pemKey := func(k *ecdsa.PrivateKey) ([]byte, error) {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
	}
	newCA := func(cn string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
		key, err := newKey()
		if err != nil {
			return nil, nil, nil, err
		}
		tmpl := template(cn)
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, nil, nil, err
		}
		cert, err := x509.ParseCertificate(der)
		return cert, key, pemCert(der), err
	}
	leaf := func(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, usage x509.ExtKeyUsage, dns []string) (certPEM, keyPEM []byte, err error) {
		key, err := newKey()
		if err != nil {
			return nil, nil, err
		}
		tmpl := template(cn)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		tmpl.DNSNames = dns
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		keyPEM, err = pemKey(key)
		return pemCert(der), keyPEM, err
	}

	p := &testPKI{}
	ca, caKey, caPEM, err := newCA("kmirror test CA")
	if err != nil {
		return nil, err
	}
	p.caPEM = caPEM
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(ca)
	if _, _, p.otherCAPEM, err = newCA("kmirror other CA"); err != nil {
		return nil, err
	}
	serverCertPEM, serverKeyPEM, err := leaf(ca, caKey, "localhost", x509.ExtKeyUsageServerAuth, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	p.serverKeyPEM = serverKeyPEM
	if p.server, err = tls.X509KeyPair(serverCertPEM, serverKeyPEM); err != nil {
		return nil, err
	}
	if p.clientCertPEM, p.clientKeyPEM, err = leaf(ca, caKey, "kmirror-client", x509.ExtKeyUsageClientAuth, nil); err != nil {
		return nil, err
	}
	return p, nil
}

func writeFile(t *testing.T, name string, parts ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	var data []byte
	for _, p := range parts {
		data = append(data, p...)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
