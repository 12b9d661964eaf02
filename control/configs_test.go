package control

import (
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/clientauth"
	"github.com/kmirror/kmirror/internal/settings"
)

// TestMirrorConfigsTable checks the mirror config table: every name's
// definition carries that name and a doc, each synonym names the entry
// that names it back, the list configs are the filters and the bootstrap
// servers, and only the source credentials are sensitive.
func TestMirrorConfigsTable(t *testing.T) {
	t.Parallel()
	for name, mc := range mirrorConfigs {
		if mc.Name != name || mc.Doc == "" || strings.Contains(mc.Doc, "\n") {
			t.Errorf("%s: definition %q with doc %q", name, mc.Name, mc.Doc)
		}
		for _, syn := range mc.Synonyms {
			if other, ok := mirrorConfigs[syn]; !ok || other.Synonym() != name {
				t.Errorf("%s: synonym %s does not name it back", name, syn)
			}
		}
		list := name == "bootstrap.servers" || strings.HasSuffix(name, ".include") || strings.HasSuffix(name, ".exclude")
		if (mc.Type == settings.List) != list {
			t.Errorf("%s: type %v", name, mc.Type)
		}
		if mc.IsSensitive() != clientauth.Sensitive(name) {
			t.Errorf("%s: sensitive %v", name, mc.IsSensitive())
		}
	}
}

// A value is checked against its definition, and the error names the
// config and the value, as INVALID_CONFIG's message.
func TestValidateMirrorConfigs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		configs map[string]string
		want    string
	}{
		{map[string]string{"bootstrap.servers": "a:1, b:2", "fetch.wait.max.ms": "0", "mirror.fetch.min.bytes": "1"}, ""},
		{map[string]string{"bootstrap.servers": "a:1", "mirror.fetch.wait.max.ms": "soon"},
			`invalid value for mirror.fetch.wait.max.ms: want an integer >= 0 (got "soon")`},
		// An INT config is bounded by its width, not clamped.
		{map[string]string{"bootstrap.servers": "a:1", "fetch.min.bytes": "2147483648"},
			`invalid value for fetch.min.bytes: want an integer <= 2147483647 (got "2147483648")`},
		{map[string]string{"bootstrap.servers": "a:1", "producer.id.rewrite": "yes"},
			`invalid value for producer.id.rewrite: want true or false (got "yes")`},
		{map[string]string{"bootstrap.servers": "a"}, `invalid value for bootstrap.servers: want host:port (got "a")`},
		{map[string]string{"bootstrap.servers": " , "}, `invalid value for bootstrap.servers: want a comma list of host:port (got " , ")`},
		{map[string]string{"fetch.wait.max.ms": "1"}, "bootstrap.servers is required"},
		{map[string]string{"bootstrap.servers": "a:1", "no.such": "1"}, `unknown mirror config "no.such"`},
	} {
		err := validateMirrorConfigs(tc.configs)
		if err == nil && tc.want != "" || err != nil && err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.configs, err, tc.want)
		}
	}
}

// fetchConfig hands each value to the fetchers, 0 meaning the fetch
// default (fetch.MirrorConfig reads 0 so).
func TestFetchConfig(t *testing.T) {
	t.Parallel()
	fc, err := fetchConfig("m", map[string]string{"bootstrap.servers": "a:1,b:2", "fetch.wait.max.ms": "250",
		"mirror.fetch.min.bytes": "0", "replication.throttled.rate": "100", "producer.id.rewrite": "TRUE"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.Bootstrap) != 2 || fc.FetchWaitMax.Milliseconds() != 250 || fc.FetchMinBytes != 0 ||
		fc.ThrottleBytesPerSecond != 100 || !fc.ProducerIDRewrite {
		t.Fatalf("fetch config %+v", fc)
	}
}
