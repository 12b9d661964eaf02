package kafkaconfigs

import (
	"slices"
	"strings"
	"testing"
)

func TestList(t *testing.T) {
	t.Parallel()
	if !slices.IsSortedFunc(broker, func(a, b Config) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatal("list not sorted: Lookup's binary search needs it")
	}
	for i := 1; i < len(broker); i++ {
		if broker[i].Name == broker[i-1].Name {
			t.Fatalf("%s listed twice", broker[i].Name)
		}
	}
	tests := []struct {
		name string
		mode Mode
		typ  Type
	}{
		{"broker.id", ReadOnly, TypeInt},
		{"delete.topic.enable", ReadOnly, TypeBoolean},
		{"zookeeper.connect", Removed, TypeString}, // 3.9
		{"port", Removed, TypeInt},                 // 2.x
		{"sasl.kerberos.min.time.before.relogin", PerBroker, TypeLong},
		{"listeners", PerBroker, TypeList},
		{"log.retention.ms", ClusterWide, TypeLong},
		{"message.max.bytes", ClusterWide, TypeInt},
		{"leader.replication.throttled.rate", ClusterWide, TypeLong}, // DynamicConfig.Broker only
	}
	for _, tt := range tests {
		c, ok := Lookup(tt.name)
		if !ok || c.Mode != tt.mode || c.Type != tt.typ {
			t.Errorf("%s: got %+v %v, want mode %d type %d", tt.name, c, ok, tt.mode, tt.typ)
		}
	}
}

func TestKnown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		listener string
		config   string // "" for a name that is not a listener override
		known    bool
	}{
		{"num.io.threads", "", "", true},
		{"no.such.config", "", "", false},
		{"listener.name.internal.ssl.keystore.location", "internal", "ssl.keystore.location", true},
		{"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config", "sasl_ssl", "sasl.jaas.config", true},
		{"listener.name.internal.no.such", "", "", false},
		{"listener.name.ssl.keystore.location", "", "", false}, // the listener part is missing
		{"listener.name..ssl.keystore.location", "", "", false},
		{"listener.name.x.scram-sha-256.ssl.keystore.location", "", "", false}, // only SASL configs take a mechanism
	}
	for _, tt := range tests {
		l, c, ok := SplitListener(tt.name)
		if l != tt.listener || c != tt.config || ok != (tt.config != "") {
			t.Errorf("SplitListener(%s) = %q %q %v", tt.name, l, c, ok)
		}
		if Known(tt.name) != tt.known {
			t.Errorf("Known(%s) = %v", tt.name, !tt.known)
		}
	}
}
