// Package kafkaconfigs is the list of Apache Kafka's broker config names,
// generated from the jars of the releases kmirror tests against (see
// gen/main.go), with each config's type and whether Kafka lets operators
// change it at runtime. kmirror uses it to tell a Kafka setting it does not
// apply (accepted, reported as ignored) from a misspelt one (refused), in
// server.properties and in the dynamic broker configs.
package kafkaconfigs

//go:generate go run ./gen

import (
	"slices"
	"strings"
)

// Type is a config's ConfigDef type.
type Type uint8

const (
	TypeBoolean Type = iota
	TypeString
	TypeInt
	TypeShort
	TypeLong
	TypeDouble
	TypeList
	TypeClass
	TypePassword
)

// Mode is Kafka's "Update Mode" of a broker config (kafka-configs.sh and
// the broker config docs print the same three words).
type Mode uint8

const (
	// ReadOnly configs need a restart: only server.properties sets them.
	ReadOnly Mode = iota
	// PerBroker configs may change at runtime on one broker only (the
	// BROKER resource named by its id).
	PerBroker
	// ClusterWide configs may change at runtime on one broker or as the
	// cluster-wide default (the BROKER resource "").
	ClusterWide
	// Removed configs were known to an older release (3.9 or 2.x) and not
	// to the newest: accepted in server.properties, never dynamic.
	Removed
)

// Config is one broker config.
type Config struct {
	Name string
	Type Type
	Mode Mode
	// ListenerOnly configs (the keystores and truststores) may change at
	// runtime only with a listener prefix: listener.name.<l>.<name>.
	ListenerOnly bool
	// Default is Kafka's default in its string form (ConfigDef's
	// convertToString), nil for none (and for passwords); from the newest
	// release that knows the config.
	Default *string
}

func str(s string) *string { return &s }

// Dynamic reports whether the newest Kafka lets the config change at runtime.
func (c Config) Dynamic() bool { return c.Mode == PerBroker || c.Mode == ClusterWide }

// Lookup finds a broker config by its exact name.
func Lookup(name string) (Config, bool) {
	i, ok := slices.BinarySearchFunc(broker, name, func(c Config, n string) int { return strings.Compare(c.Name, n) })
	if !ok {
		return Config{}, false
	}
	return broker[i], true
}

// All returns every broker config, sorted by name. The slice is shared:
// callers must not modify it.
func All() []Config { return broker }

// listenerPrefix starts Kafka's per-listener overrides:
// listener.name.<listener>.<config>, and for SASL configs
// listener.name.<listener>.<mechanism>.<config>.
const listenerPrefix = "listener.name."

// SplitListener splits a per-listener override into its lower-case
// listener name and the config it overrides; ok is false for any other
// name. Kafka takes any config after the prefix, and a SASL config after a
// mechanism (listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config).
func SplitListener(name string) (listener, config string, ok bool) {
	rest, found := strings.CutPrefix(name, listenerPrefix)
	if !found {
		return "", "", false
	}
	listener, config, found = strings.Cut(rest, ".")
	if !found || listener == "" || config == "" {
		return "", "", false
	}
	if _, known := Lookup(config); known {
		return listener, config, true
	}
	if _, sasl, found := strings.Cut(config, "."); found && strings.HasPrefix(sasl, "sasl.") {
		if _, known := Lookup(sasl); known {
			return listener, sasl, true
		}
	}
	return "", "", false
}

// Known reports whether some Kafka release knows name as a broker config,
// directly or as a per-listener override of one.
func Known(name string) bool {
	if _, ok := Lookup(name); ok {
		return true
	}
	_, _, ok := SplitListener(name)
	return ok
}
