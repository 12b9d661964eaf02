package control

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/internal/clientauth"
	"github.com/kmirror/kmirror/internal/pattern"
	syncacls "github.com/kmirror/kmirror/sync/acls"
)

// mirrorConfig is one mirror-level config (SPEC.md section 3). apply is nil
// for configs that are stored and described but used elsewhere (filters,
// read by the sync loop) or not at all on one node.
type mirrorConfig struct {
	name  string
	check func(string) error
	apply func(c *fetch.MirrorConfig, v string)
}

func msConfig(set func(c *fetch.MirrorConfig, d time.Duration)) (func(string) error, func(*fetch.MirrorConfig, string)) {
	return intAtLeast(0), func(c *fetch.MirrorConfig, v string) {
		n, _ := strconv.ParseInt(v, 10, 64)
		set(c, time.Duration(n)*time.Millisecond)
	}
}

func intAtLeast(min int64) func(string) error {
	return func(v string) error {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < min {
			return fmt.Errorf("want an integer >= %d, got %q", min, v)
		}
		return nil
	}
}

func atoi32(v string) int32 { n, _ := strconv.ParseInt(v, 10, 32); return int32(n) }

// mirrorConfigs lists the configs a mirror accepts. The prototype's
// "mirror." prefixed names and the later unprefixed ones are both taken.
var mirrorConfigs = func() map[string]mirrorConfig {
	m := map[string]mirrorConfig{}
	add := func(c mirrorConfig, aliases ...string) {
		m[c.name] = c
		for _, a := range aliases {
			c.name = a
			m[a] = c
		}
	}
	ck, ap := msConfig(func(c *fetch.MirrorConfig, d time.Duration) { c.FetchWaitMax = d })
	add(mirrorConfig{name: "mirror.fetch.wait.max.ms", check: ck, apply: ap}, "fetch.wait.max.ms")
	ck, ap = msConfig(func(c *fetch.MirrorConfig, d time.Duration) { c.FetchBackoff = d })
	add(mirrorConfig{name: "mirror.fetch.backoff.ms", check: ck, apply: ap}, "fetch.backoff.ms")
	ck, ap = msConfig(func(c *fetch.MirrorConfig, d time.Duration) { c.RequestTimeout = d })
	add(mirrorConfig{name: "request.timeout.ms", check: ck, apply: ap})
	ck, ap = msConfig(func(c *fetch.MirrorConfig, d time.Duration) { c.DialTimeout = d })
	add(mirrorConfig{name: "socket.connection.setup.timeout.ms", check: ck, apply: ap})
	add(mirrorConfig{name: "mirror.fetch.min.bytes", check: intAtLeast(0),
		apply: func(c *fetch.MirrorConfig, v string) { c.FetchMinBytes = atoi32(v) }}, "fetch.min.bytes")
	add(mirrorConfig{name: "mirror.fetch.response.max.bytes", check: intAtLeast(1),
		apply: func(c *fetch.MirrorConfig, v string) { c.FetchMaxBytes = atoi32(v) }}, "fetch.response.max.bytes")
	add(mirrorConfig{name: "mirror.fetch.max.bytes", check: intAtLeast(1),
		apply: func(c *fetch.MirrorConfig, v string) { c.PartitionMaxBytes = atoi32(v) }}, "fetch.max.bytes")
	add(mirrorConfig{name: "mirror.socket.receive.buffer.bytes", check: intAtLeast(-1),
		apply: func(c *fetch.MirrorConfig, v string) { c.ReceiveBuffer = int(atoi32(v)) }}, "socket.receive.buffer.bytes")
	add(mirrorConfig{name: "mirror.num.replica.fetchers", check: intAtLeast(1),
		apply: func(c *fetch.MirrorConfig, v string) { c.Fetchers = int(atoi32(v)) }}, "num.replica.fetchers")
	add(mirrorConfig{name: "mirror.replication.throttled.rate", check: intAtLeast(0),
		apply: func(c *fetch.MirrorConfig, v string) { c.ThrottleBytesPerSecond, _ = strconv.ParseInt(v, 10, 64) }},
		"replication.throttled.rate")
	add(mirrorConfig{name: "producer.id.rewrite", check: checkBool,
		apply: func(c *fetch.MirrorConfig, v string) { c.ProducerIDRewrite = strings.EqualFold(v, "true") }})
	// The KIP's unclean-election switch: whether a mirroring partition
	// whose source lost records the copy holds follows the source
	// (ULE_RECOVERY, truncating the copy) instead of failing. Read by the
	// controller when it happens, so no fetch setting.
	add(mirrorConfig{name: uncleanElectionConfig, check: checkBool})
	add(mirrorConfig{name: quotaSyncConfig, check: checkBool})
	add(mirrorConfig{name: "bootstrap.servers", check: checkBootstrap,
		apply: func(c *fetch.MirrorConfig, v string) { c.Bootstrap = splitList(v) }})
	// Security settings are checked together (clientauth.Parse) when the
	// mirror's configs are validated as a whole; alone, only their shape.
	for _, n := range clientauth.Keys {
		add(mirrorConfig{name: n})
	}
	m["security.protocol"] = mirrorConfig{name: "security.protocol", check: func(v string) error {
		switch strings.ToUpper(strings.TrimSpace(v)) {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
			return nil
		}
		return fmt.Errorf("want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got %q", v)
	}}
	for _, n := range []string{"mirror.source.cluster.id", "socket.connection.setup.timeout.max.ms",
		"connections.max.idle.ms", "mirror.socket.timeout.ms"} {
		add(mirrorConfig{name: n})
	}
	for _, n := range []string{"topics.include", "topics.exclude", "groups.include", "groups.exclude",
		"topic.properties.exclude"} {
		add(mirrorConfig{name: "mirror." + n, check: checkPatterns}, n)
	}
	for _, n := range []string{"acls.include", "acl.include"} {
		add(mirrorConfig{name: "mirror." + n, check: func(v string) error {
			_, err := syncacls.ParseRules(v)
			return err
		}}, n)
	}
	return m
}()

// checkPatterns checks a comma list of full-match regexes.
func checkPatterns(v string) error {
	_, err := pattern.CompileAll(splitList(v))
	return err
}

func checkBool(v string) error {
	if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
		return fmt.Errorf("want true or false, got %q", v)
	}
	return nil
}

func checkBootstrap(v string) error {
	if len(splitList(v)) == 0 {
		return fmt.Errorf("want a comma list of host:port, got %q", v)
	}
	for _, hp := range splitList(v) {
		if i := strings.LastIndexByte(hp, ':'); i <= 0 || i == len(hp)-1 {
			return fmt.Errorf("want host:port, got %q", hp)
		}
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
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
		if mc.check != nil {
			if err := mc.check(v); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
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
