package main

import (
	"crypto/tls"
	"fmt"
	"path"
	"strings"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/clientauth"
	"github.com/kmirror/kmirror/internal/settings"
)

// Listener security and authorization settings of `kmirror serve`, with
// Kafka's names and meanings: listener.security.protocol.map, the
// server-side ssl.* keys (PEM only), sasl.enabled.mechanisms, the PLAIN
// users of listener.name.<listener>.plain.sasl.jaas.config, and the ACL
// authorizer switches.

var securitySettings = []setting{
	{Def: settings.Def{Name: "sasl.enabled.mechanisms", Doc: "SASL mechanisms offered on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (default all three; PLAIN only with users in its JAAS config)"},
		apply: func(c *broker.Config, v string) error {
			c.Security.SASLMechanisms = nil
			for _, m := range settings.SplitList(v) {
				m = strings.ToUpper(m)
				switch m {
				case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
				default:
					return fmt.Errorf("want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got %q (GSSAPI and OAUTHBEARER are not served)", m)
				}
				c.Security.SASLMechanisms = append(c.Security.SASLMechanisms, m)
			}
			return nil
		}},
	{Def: settings.Def{Name: "authorizer.class.name", Doc: "any of Kafka's ACL authorizers (StandardAuthorizer, AclAuthorizer) turns ACL checks on; empty: off (default)"},
		apply: func(c *broker.Config, v string) error {
			switch path.Ext("." + v) {
			case ".", ".StandardAuthorizer", ".AclAuthorizer":
				c.Security.Authorizer = v != ""
				return nil
			}
			return fmt.Errorf("want org.apache.kafka.metadata.authorizer.StandardAuthorizer (or empty), got %q", v)
		}},
	{Def: settings.Def{Name: "super.users", Doc: "principals allowed everything, separated by ';' (User:admin;User:ops)"},
		apply: func(c *broker.Config, v string) error {
			c.Security.SuperUsers = nil
			for _, p := range strings.Split(v, ";") {
				if p = strings.TrimSpace(p); p == "" {
					continue
				}
				if !strings.Contains(p, ":") {
					return fmt.Errorf("want principals of the form Type:name, got %q", p)
				}
				c.Security.SuperUsers = append(c.Security.SuperUsers, p)
			}
			return nil
		}},
	{Def: settings.Def{Name: "allow.everyone.if.no.acl.found", Doc: "with the authorizer on, a resource without any ACL is open (true) or closed (false, default)"},
		apply: func(c *broker.Config, v string) (err error) {
			c.Security.AllowEveryoneIfNoACL, err = settings.ParseBool(v)
			return err
		}},
	// The TLS settings are read together by applyServerTLS; alone they
	// are only checked for shape there.
	{Def: settings.Def{Name: "ssl.keystore.type", Doc: "PEM (the only type served)"}},
	{Def: settings.Def{Name: "ssl.keystore.location", Doc: "PEM file with this node's private key and certificate chain (SSL, SASL_SSL listeners)"}},
	{Def: settings.Def{Name: "ssl.keystore.certificate.chain", Doc: "this node's certificate chain, PEM text (instead of ssl.keystore.location)"}},
	{Def: settings.Def{Name: "ssl.keystore.key", Doc: "this node's private key, PEM text, unencrypted (instead of ssl.keystore.location)"}},
	{Def: settings.Def{Name: "ssl.truststore.type", Doc: "PEM (the only type served)"}},
	{Def: settings.Def{Name: "ssl.truststore.location", Doc: "PEM file of the CAs client certificates must chain to"}},
	{Def: settings.Def{Name: "ssl.truststore.certificates", Doc: "the CAs client certificates must chain to, PEM text"}},
	{Def: settings.Def{Name: "ssl.client.auth", Doc: "client certificates on SSL listeners: none (default), requested or required"}},
	{Def: settings.Def{Name: "ssl.enabled.protocols", Doc: "TLSv1.2 and/or TLSv1.3 (default both)"}},
	{Def: settings.Def{Name: "ssl.protocol", Doc: "TLS, TLSv1.2 or TLSv1.3"}},
}

// plainJAASPattern is the per-listener PLAIN JAAS config key.
const plainJAASPattern = "listener.name.*.plain.sasl.jaas.config"

// isPlainJAASKey reports whether key is a listener's PLAIN JAAS config.
func isPlainJAASKey(key string) bool {
	ok, _ := path.Match(plainJAASPattern, key)
	return ok
}

// applyProtocolMap applies listener.security.protocol.map to the listeners
// bound so far (it follows listeners and controller.listener.names in the
// table). Entries for listeners not bound (CONTROLLER) are checked only.
func applyProtocolMap(c *broker.Config, v string) error {
	protos := map[string]string{}
	for _, item := range settings.SplitList(v) {
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return fmt.Errorf("want a comma-separated list of NAME:PROTOCOL (got %q)", item)
		}
		switch proto {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
		default:
			return fmt.Errorf("want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL as protocol (got %q)", item)
		}
		protos[name] = proto
	}
	for i := range c.Listeners {
		if p, ok := protos[c.Listeners[i].Name]; ok {
			c.Listeners[i].Protocol = p
		}
	}
	return nil
}

// applyServerSecurity reads the settings that only make sense together:
// the PLAIN users of every listener's JAAS config and the TLS key and
// trust stores. It runs after the table.
func applyServerSecurity(c *broker.Config, vals map[string]settingValue) error {
	for key, v := range vals {
		if !isPlainJAASKey(key) {
			continue
		}
		users, err := plainUsers(v.text)
		if err != nil {
			return fmt.Errorf("%s: %w (%s)", key, err, v.origin)
		}
		if c.Security.PlainUsers == nil {
			c.Security.PlainUsers = map[string]string{}
		}
		for u, p := range users {
			c.Security.PlainUsers[u] = p
		}
	}
	return applyServerTLS(c, vals)
}

// plainUsers reads the user_<name>="<password>" options of a
// PlainLoginModule JAAS config, as Kafka's PLAIN server does.
func plainUsers(jaas string) (map[string]string, error) {
	module, opts, err := clientauth.ParseJAAS(jaas)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(module, "PlainLoginModule") {
		return nil, fmt.Errorf("want the PlainLoginModule, got %s", module)
	}
	users := map[string]string{}
	for k, v := range opts {
		if u, ok := strings.CutPrefix(k, "user_"); ok && u != "" {
			users[u] = v
		}
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("no user_<name>=\"<password>\" option: PLAIN would accept nobody")
	}
	return users, nil
}

// applyServerTLS builds the listeners' TLS config from the ssl.* settings
// (with the client-side parser's PEM handling: a keystore here is this
// node's certificate, a truststore the CAs of client certificates).
func applyServerTLS(c *broker.Config, vals map[string]settingValue) error {
	ssl := map[string]string{"security.protocol": "SSL"}
	any := false
	for _, k := range []string{"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain",
		"ssl.keystore.key", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
		"ssl.enabled.protocols", "ssl.protocol"} {
		if v, ok := vals[k]; ok {
			ssl[k], any = strings.TrimSpace(v.text), true
		}
	}
	auth := tls.NoClientCert
	if v, ok := vals["ssl.client.auth"]; ok {
		switch strings.ToLower(strings.TrimSpace(v.text)) {
		case "none", "":
		case "requested":
			auth = tls.VerifyClientCertIfGiven
		case "required":
			auth = tls.RequireAndVerifyClientCert
		default:
			return fmt.Errorf("ssl.client.auth: want none, requested or required (got %q) (%s)", v.text, v.origin)
		}
	}
	if !any {
		return nil
	}
	parsed, err := clientauth.Parse(ssl)
	if err != nil {
		return err
	}
	if len(parsed.TLS.Certificates) == 0 {
		return fmt.Errorf("ssl.keystore.location (or ssl.keystore.certificate.chain and ssl.keystore.key): a TLS listener needs this node's certificate")
	}
	c.Security.TLS = &tls.Config{Certificates: parsed.TLS.Certificates, ClientCAs: parsed.TLS.RootCAs,
		ClientAuth: auth, MinVersion: parsed.TLS.MinVersion, MaxVersion: parsed.TLS.MaxVersion}
	return nil
}
