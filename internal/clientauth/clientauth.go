// Package clientauth turns Kafka client security settings (the
// security.protocol, sasl.* and ssl.* keys of a mirror's config, SPEC.md
// section 3) into what kmirror's source connections use: a *tls.Config and
// a franz-go SASL mechanism. One mirror's settings build one Security;
// nothing is shared between mirrors, so one mirror's credentials are never
// sent to another mirror's source.
//
// Supported: PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL; SASL PLAIN,
// SCRAM-SHA-256 and SCRAM-SHA-512 with Kafka's sasl.jaas.config syntax
// (PlainLoginModule / ScramLoginModule); certificates in PEM only (Kafka's
// ssl.*.type=PEM: a file path in ssl.truststore.location /
// ssl.keystore.location, or the PEM text in ssl.truststore.certificates /
// ssl.keystore.certificate.chain + ssl.keystore.key). JKS and PKCS12 stores
// and encrypted private keys are refused with an error saying so.
package clientauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security is how to reach one source.
type Security struct {
	// Protocol is security.protocol, upper case.
	Protocol string
	// TLS is nil unless Protocol is SSL or SASL_SSL.
	TLS *tls.Config
	// SASL is nil unless Protocol is SASL_PLAINTEXT or SASL_SSL.
	SASL sasl.Mechanism
}

// Keys lists the settings Parse reads; others in the sasl. and ssl.
// namespaces are refused (a setting silently ignored is a hole).
var Keys = []string{
	"security.protocol", "sasl.mechanism", "sasl.jaas.config",
	"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
	"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
	"ssl.key.password", "ssl.endpoint.identification.algorithm", "ssl.protocol", "ssl.enabled.protocols",
}

// Sensitive reports whether a setting holds a secret: its value is never
// printed (DescribeConfigs answers null, logs and the CLI leave it out).
func Sensitive(name string) bool {
	switch name {
	case "sasl.jaas.config", "ssl.key.password", "ssl.keystore.key":
		return true
	}
	return false
}

// IsKey reports whether name is one of Keys.
func IsKey(name string) bool {
	for _, k := range Keys {
		if k == name {
			return true
		}
	}
	return false
}

// Parse builds a Security from configs (only the keys in Keys are read).
// Errors name the setting.
func Parse(configs map[string]string) (Security, error) {
	s := Security{Protocol: strings.ToUpper(strings.TrimSpace(configs["security.protocol"]))}
	if s.Protocol == "" {
		s.Protocol = "PLAINTEXT"
	}
	var useTLS, useSASL bool
	switch s.Protocol {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return s, fmt.Errorf("security.protocol: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got %q", configs["security.protocol"])
	}
	if useSASL {
		mech, err := parseSASL(configs)
		if err != nil {
			return s, err
		}
		s.SASL = mech
	} else if configs["sasl.jaas.config"] != "" {
		return s, fmt.Errorf("sasl.jaas.config is set but security.protocol is %s: use SASL_PLAINTEXT or SASL_SSL", s.Protocol)
	}
	if useTLS {
		cfg, err := parseTLS(configs)
		if err != nil {
			return s, err
		}
		s.TLS = cfg
	}
	return s, nil
}

// KgoOpts are the franz-go client options for this Security.
func (s Security) KgoOpts() []kgo.Opt {
	var opts []kgo.Opt
	if s.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(s.TLS.Clone()))
	}
	if s.SASL != nil {
		opts = append(opts, kgo.SASL(s.SASL))
	}
	return opts
}

func parseSASL(configs map[string]string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(configs["sasl.mechanism"]))
	if mech == "" {
		mech = "PLAIN" // Kafka's default
	}
	switch mech {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return nil, fmt.Errorf("sasl.mechanism: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got %q", configs["sasl.mechanism"])
	}
	jaas := configs["sasl.jaas.config"]
	if strings.TrimSpace(jaas) == "" {
		return nil, errors.New("sasl.jaas.config is required with SASL")
	}
	module, opts, err := ParseJAAS(jaas)
	if err != nil {
		return nil, fmt.Errorf("sasl.jaas.config: %w", err)
	}
	user, pass := opts["username"], opts["password"]
	if user == "" || pass == "" {
		return nil, errors.New("sasl.jaas.config: username and password are required")
	}
	short := module[strings.LastIndexByte(module, '.')+1:]
	if mech == "PLAIN" {
		if short != "PlainLoginModule" {
			return nil, fmt.Errorf("sasl.jaas.config: sasl.mechanism PLAIN needs PlainLoginModule, got %s", module)
		}
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	}
	if short != "ScramLoginModule" {
		return nil, fmt.Errorf("sasl.jaas.config: sasl.mechanism %s needs ScramLoginModule, got %s", mech, module)
	}
	a := scram.Auth{User: user, Pass: pass, IsToken: strings.EqualFold(opts["tokenauth"], "true")}
	if mech == "SCRAM-SHA-256" {
		return a.AsSha256Mechanism(), nil
	}
	return a.AsSha512Mechanism(), nil
}

// tlsVersions applies ssl.enabled.protocols (a list of TLSv1.2 and
// TLSv1.3) and checks ssl.protocol (TLS, TLSv1.2 or TLSv1.3; older
// protocols are refused, as in Kafka 3.0+ defaults).
func tlsVersions(cfg *tls.Config, configs map[string]string) error {
	versions := map[string]uint16{"TLSV1.2": tls.VersionTLS12, "TLSV1.3": tls.VersionTLS13}
	if p := strings.ToUpper(strings.TrimSpace(configs["ssl.protocol"])); p != "" && p != "TLS" {
		if _, ok := versions[p]; !ok {
			return fmt.Errorf("ssl.protocol: want TLS, TLSv1.2 or TLSv1.3, got %q", configs["ssl.protocol"])
		}
	}
	list, set := configs["ssl.enabled.protocols"]
	if !set {
		return nil
	}
	cfg.MinVersion, cfg.MaxVersion = 0, 0
	for _, p := range strings.Split(list, ",") {
		v, ok := versions[strings.ToUpper(strings.TrimSpace(p))]
		if !ok {
			return fmt.Errorf("ssl.enabled.protocols: want TLSv1.2 and/or TLSv1.3, got %q", list)
		}
		if cfg.MinVersion == 0 || v < cfg.MinVersion {
			cfg.MinVersion = v
		}
		cfg.MaxVersion = max(cfg.MaxVersion, v)
	}
	return nil
}

func parseTLS(configs map[string]string) (*tls.Config, error) {
	for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if t := configs[k]; t != "" && !strings.EqualFold(t, "PEM") {
			return nil, fmt.Errorf("%s: only PEM is supported, got %q", k, t)
		}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if err := tlsVersions(cfg, configs); err != nil {
		return nil, err
	}
	trust, err := pemSetting(configs, "ssl.truststore.certificates", "ssl.truststore.location")
	if err != nil {
		return nil, err
	}
	if trust != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(trust) {
			return nil, errors.New("ssl.truststore: no PEM certificate found")
		}
		cfg.RootCAs = pool
	}
	chain, err := pemSetting(configs, "ssl.keystore.certificate.chain", "ssl.keystore.location")
	if err != nil {
		return nil, err
	}
	key := []byte(configs["ssl.keystore.key"])
	if configs["ssl.key.password"] != "" {
		return nil, errors.New("ssl.key.password: encrypted private keys are not supported; give the key unencrypted (PEM)")
	}
	if chain != nil {
		if len(key) == 0 {
			key = chain // ssl.keystore.location: one PEM file with the key and its chain
		}
		cert, err := tls.X509KeyPair(chain, key)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	} else if len(key) > 0 {
		return nil, errors.New("ssl.keystore.key is set without ssl.keystore.certificate.chain")
	}
	switch alg := configs["ssl.endpoint.identification.algorithm"]; {
	case alg == "":
		if _, set := configs["ssl.endpoint.identification.algorithm"]; set {
			// Kafka's empty value: no host name check (the chain is still
			// verified against the trust store).
			cfg.InsecureSkipVerify = true
			cfg.VerifyConnection = verifyChainOnly(cfg)
		}
	case strings.EqualFold(alg, "https"):
	default:
		return nil, fmt.Errorf("ssl.endpoint.identification.algorithm: want https or empty, got %q", alg)
	}
	return cfg, nil
}

// verifyChainOnly verifies the peer's chain against cfg's roots without
// checking the host name. It is a VerifyConnection hook, so resumed
// sessions are checked too.
func verifyChainOnly(cfg *tls.Config) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		certs := cs.PeerCertificates
		if len(certs) == 0 {
			return errors.New("tls: the source sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: cfg.RootCAs, Intermediates: x509.NewCertPool()}
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := certs[0].Verify(opts)
		return err
	}
}

// pemSetting reads a PEM setting given inline (inlineKey) or as a file
// (fileKey); nil when neither is set.
func pemSetting(configs map[string]string, inlineKey, fileKey string) ([]byte, error) {
	inline, file := configs[inlineKey], configs[fileKey]
	switch {
	case inline != "" && file != "":
		return nil, fmt.Errorf("%s and %s are both set: give one", inlineKey, fileKey)
	case inline != "":
		return []byte(inline), nil
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fileKey, err)
		}
		return data, nil
	}
	return nil, nil
}
