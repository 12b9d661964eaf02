package control

import (
	"fmt"
	"strings"
	"time"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/internal/clientauth"
	"github.com/kmirror/kmirror/internal/pattern"
	"github.com/kmirror/kmirror/internal/settings"
	syncacls "github.com/kmirror/kmirror/sync/acls"
)

// mirrorConfig is one mirror-level config (SPEC.md section 3): its Def (the
// synonym is its other name, the prototype's "mirror." prefixed one or the
// later unprefixed one) and where fetchers take it. apply is nil for
// configs that are stored and described but used elsewhere (filters, read
// by the sync loop) or not at all on one node.
type mirrorConfig struct {
	settings.Def
	apply func(c *fetch.MirrorConfig, v string)
}

// msConfig is a duration in milliseconds that fetch.MirrorConfig reads as
// its default when 0.
func msConfig(name, doc string, set func(c *fetch.MirrorConfig, d time.Duration)) mirrorConfig {
	return mirrorConfig{Def: settings.Def{Name: name, Type: settings.Long, Doc: doc, Dynamic: true,
		Check: settings.AtLeast(settings.Long, 0), Zero: settings.ZeroDefault},
		apply: func(c *fetch.MirrorConfig, v string) { set(c, time.Duration(settings.MustInt(v))*time.Millisecond) }}
}

// intConfig is a Kafka INT at least lo.
func intConfig(name, doc string, lo int64, zero settings.Zero, set func(c *fetch.MirrorConfig, n int32)) mirrorConfig {
	return mirrorConfig{Def: settings.Def{Name: name, Type: settings.Int, Doc: doc, Dynamic: true,
		Check: settings.AtLeast(settings.Int, lo), Zero: zero},
		apply: func(c *fetch.MirrorConfig, v string) { set(c, int32(settings.MustInt(v))) }}
}

// mirrorDef is a config fetchers do not read.
func mirrorDef(name string, typ settings.Type, check func(string) error, doc string) mirrorConfig {
	return mirrorConfig{Def: settings.Def{Name: name, Type: typ, Doc: doc, Dynamic: true, Check: check}}
}

// mirrorConfigs lists the configs a mirror accepts, under each name: the
// prototype's "mirror." prefixed names and the later unprefixed ones are
// both taken.
var mirrorConfigs = func() map[string]mirrorConfig {
	m := map[string]mirrorConfig{}
	add := func(c mirrorConfig, synonym ...string) {
		c.Synonyms = synonym
		m[c.Name] = c
		for _, a := range synonym {
			alias := c
			alias.Name, alias.Synonyms = a, []string{c.Name}
			m[a] = alias
		}
	}
	add(msConfig("mirror.fetch.wait.max.ms", "Longest wait of a source fetch for mirror.fetch.min.bytes (default 1000).",
		func(c *fetch.MirrorConfig, d time.Duration) { c.FetchWaitMax = d }), "fetch.wait.max.ms")
	add(msConfig("mirror.fetch.backoff.ms", "Wait after a failed source fetch (default 1000).",
		func(c *fetch.MirrorConfig, d time.Duration) { c.FetchBackoff = d }), "fetch.backoff.ms")
	add(msConfig("request.timeout.ms", "Timeout of a request to the source (default 30000).",
		func(c *fetch.MirrorConfig, d time.Duration) { c.RequestTimeout = d }))
	add(msConfig("socket.connection.setup.timeout.ms", "Timeout of a connection to the source (default 10000).",
		func(c *fetch.MirrorConfig, d time.Duration) { c.DialTimeout = d }))
	add(intConfig("mirror.fetch.min.bytes", "Bytes a source fetch waits for (default 1).", 0, settings.ZeroDefault,
		func(c *fetch.MirrorConfig, n int32) { c.FetchMinBytes = n }), "fetch.min.bytes")
	add(intConfig("mirror.fetch.response.max.bytes", "Largest source fetch response (default 10485760).", 1, settings.ZeroRefused,
		func(c *fetch.MirrorConfig, n int32) { c.FetchMaxBytes = n }), "fetch.response.max.bytes")
	add(intConfig("mirror.fetch.max.bytes", "Largest fetch per partition (default 1048576).", 1, settings.ZeroRefused,
		func(c *fetch.MirrorConfig, n int32) { c.PartitionMaxBytes = n }), "fetch.max.bytes")
	add(intConfig("mirror.socket.receive.buffer.bytes", "Receive buffer of source connections, -1 the OS default (default 65536).", -1, settings.ZeroDefault,
		func(c *fetch.MirrorConfig, n int32) { c.ReceiveBuffer = int(n) }), "socket.receive.buffer.bytes")
	add(intConfig("mirror.num.replica.fetchers", "Fetchers per source broker (default 1).", 1, settings.ZeroRefused,
		func(c *fetch.MirrorConfig, n int32) { c.Fetchers = int(n) }), "num.replica.fetchers")
	add(mirrorConfig{Def: settings.Def{Name: "mirror.replication.throttled.rate", Type: settings.Long, Dynamic: true,
		Doc: "Bytes appended per second across the mirror.", Check: settings.AtLeast(settings.Long, 0), Zero: settings.ZeroOff},
		apply: func(c *fetch.MirrorConfig, v string) { c.ThrottleBytesPerSecond = settings.MustInt(v) }},
		"replication.throttled.rate")
	add(mirrorConfig{Def: settings.Def{Name: "producer.id.rewrite", Type: settings.Boolean, Dynamic: true, Check: settings.CheckBool,
		Doc: "Move mirrored producer ids into a reserved range (DESIGN.md decision 2; default false)."},
		apply: func(c *fetch.MirrorConfig, v string) { c.ProducerIDRewrite, _ = settings.ParseBool(v) }})
	// The KIP's unclean-election switch: whether a mirroring partition
	// whose source lost records the copy holds follows the source
	// (ULE_RECOVERY, truncating the copy) instead of failing. Read by the
	// controller when it happens, so no fetch setting.
	add(mirrorDef(uncleanElectionConfig, settings.Boolean, settings.CheckBool,
		"Follow a source that lost records the copy holds (ULE_RECOVERY) instead of failing."))
	add(mirrorDef(quotaSyncConfig, settings.Boolean, settings.CheckBool, "Copy the source's client quotas."))
	add(mirrorConfig{Def: settings.Def{Name: "bootstrap.servers", Type: settings.List, Dynamic: true, Check: checkBootstrap,
		Doc: "The source cluster's host:port list (required)."},
		apply: func(c *fetch.MirrorConfig, v string) { c.Bootstrap = settings.Items(v) }})
	// Security settings are checked together (clientauth.Parse) when the
	// mirror's configs are validated as a whole; alone, only their shape.
	for _, n := range clientauth.Keys {
		c := mirrorDef(n, settings.String, nil, "Security of the connections to the source, as a Kafka client's.")
		c.Sensitive = clientauth.Sensitive(n)
		add(c)
	}
	m["security.protocol"] = mirrorDef("security.protocol", settings.String, func(v string) error {
		switch strings.ToUpper(strings.TrimSpace(v)) {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
			return nil
		}
		return fmt.Errorf("want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (got %q)", v)
	}, "Protocol of the connections to the source.")
	for _, n := range []string{"socket.connection.setup.timeout.max.ms", "connections.max.idle.ms", "mirror.socket.timeout.ms"} {
		add(mirrorDef(n, settings.String, nil, "Stored, no effect on kmirror."))
	}
	add(mirrorDef("mirror.source.cluster.id", settings.String, nil,
		"The source cluster's id, set at create; it cannot change."))
	for _, n := range []string{"topics.include", "topics.exclude", "groups.include", "groups.exclude",
		"topic.properties.exclude"} {
		add(mirrorDef("mirror."+n, settings.List, checkPatterns, "Comma list of full-match regexes."), n)
	}
	for _, n := range []string{"acls.include", "acl.include"} {
		add(mirrorDef("mirror."+n, settings.List, func(v string) error {
			_, err := syncacls.ParseRules(v)
			return err
		}, "The ACL filters of the sync."), n)
	}
	return m
}()

// checkPatterns checks a comma list of full-match regexes.
func checkPatterns(v string) error {
	_, err := pattern.CompileAll(settings.Items(v))
	return err
}

func checkBootstrap(v string) error {
	hosts := settings.Items(v)
	if len(hosts) == 0 {
		return fmt.Errorf("want a comma list of host:port (got %q)", v)
	}
	for _, hp := range hosts {
		if i := strings.LastIndexByte(hp, ':'); i <= 0 || i == len(hp)-1 {
			return fmt.Errorf("want host:port (got %q)", hp)
		}
	}
	return nil
}

// validateMirrorConfigs checks a mirror's configs; the error names the
// config at fault. bootstrap.servers is required.
func validateMirrorConfigs(configs map[string]string) error {
	for k, v := range configs {
		mc, ok := mirrorConfigs[k]
		if !ok {
			if strings.HasPrefix(k, "sasl.") || strings.HasPrefix(k, "ssl.") {
				return fmt.Errorf("%s: not supported (kmirror reads %s)", k, strings.Join(clientauth.Keys, ", "))
			}
			return fmt.Errorf("unknown mirror config %q", k)
		}
		if err := mc.Validate(v); err != nil {
			return err
		}
	}
	if _, ok := configs["bootstrap.servers"]; !ok {
		return fmt.Errorf("bootstrap.servers is required")
	}
	_, err := clientauth.Parse(configs)
	return err
}

// fetchConfig turns a mirror's configs into the fetchers' settings. The
// configs were validated when stored; a security setting that no longer
// parses (a PEM file removed since) is returned as an error.
func fetchConfig(name string, configs map[string]string) (fetch.MirrorConfig, error) {
	fc := fetch.MirrorConfig{Name: name}
	for k, v := range configs {
		if mc, ok := mirrorConfigs[k]; ok && mc.apply != nil {
			mc.apply(&fc, v)
		}
	}
	sec, err := clientauth.Parse(configs)
	if err != nil {
		return fc, fmt.Errorf("mirror %s: %w", name, err)
	}
	fc.TLS, fc.SASL = sec.TLS, sec.SASL
	return fc, nil
}
