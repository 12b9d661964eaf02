// Package settings is the one definition type of every kmirror setting and
// the parsers and validators of their values. Four tables use it: the
// server.properties keys (cmd/kmirror), the topic configs and the dynamic
// broker configs (broker/), and the mirror configs (control/). Each table
// stays with the package that gives its settings a meaning, but every entry
// is a Def and every value is read by the functions here, so a setting's
// type, validation, documentation and the meaning of its zero are written
// once, and the same value gets the same answer from a file, --help,
// DescribeConfigs and IncrementalAlterConfigs.
//
// Values come from operators' files and from the wire (AlterConfigs,
// CreateTopics, the mirror RPCs): the parsers never panic and refuse, with
// a message, anything they cannot read (parse_fuzz_test.go).
//
// Messages. A value's error is "want <what> (got <value>)", the form the
// server.properties errors had; each surface prefixes it as its tests and
// Kafka's tooling expect: "<name>: ... (<where>)" for server.properties,
// "invalid value for <name>: ..." for topic, broker-default and mirror
// configs (Def.Validate). Kafka's own type errors on dynamic broker
// configs keep Kafka's words (TypeError).
package settings

import (
	"fmt"
	"strings"
)

// Type is a setting's type as DescribeConfigs reports it: the values are
// Kafka's ConfigType codes and part of the wire format.
type Type int8

const (
	Boolean  Type = 1
	String   Type = 2
	Int      Type = 3
	Short    Type = 4
	Long     Type = 5
	Double   Type = 6
	List     Type = 7
	Class    Type = 8
	Password Type = 9
)

// String is the type's name as Kafka's ConfigDef.Type prints it.
func (t Type) String() string {
	switch t {
	case Boolean:
		return "BOOLEAN"
	case String:
		return "STRING"
	case Int:
		return "INT"
	case Short:
		return "SHORT"
	case Long:
		return "LONG"
	case Double:
		return "DOUBLE"
	case List:
		return "LIST"
	case Class:
		return "CLASS"
	case Password:
		return "PASSWORD"
	}
	return fmt.Sprintf("Type(%d)", int8(t))
}

// Zero says what 0 means for a numeric setting. Kafka and the Go configs
// kmirror hands values to disagree: storage.Config and fetch.MirrorConfig
// read 0 as "use the default", where Kafka's 0 often means "at once".
// Every numeric setting whose Check accepts 0 says which it is.
type Zero uint8

const (
	// ZeroRefused: the setting's validation refuses 0, or it is not
	// numeric.
	ZeroRefused Zero = iota
	// ZeroLiteral: 0 is a value like any other (0 bytes of compaction lag,
	// no throttle) and is passed on as 0.
	ZeroLiteral
	// ZeroAtOnce: Kafka's 0 means "at once" or "every time" (flush at
	// once, index every batch, drop tombstones at once). The receiving Go
	// config reads 0 as its default, so 0 is passed on as 1 (ms, byte):
	// the same within one unit, where 0 would silently mean days.
	ZeroAtOnce
	// ZeroOff: 0 switches the feature off (no periodic metadata sync, no
	// retries).
	ZeroOff
	// ZeroDefault: 0 means the built-in default (the mirror fetch
	// settings, as fetch.MirrorConfig reads them).
	ZeroDefault
)

// Of maps a parsed value to the one the receiving Go config must be given
// (ZeroAtOnce: 0 becomes 1); every other value passes unchanged.
func (z Zero) Of(n int64) int64 {
	if n == 0 && z == ZeroAtOnce {
		return 1
	}
	return n
}

// Note is the sentence the documentation of a setting with this zero
// carries ("" when 0 needs no words).
func (z Zero) Note() string {
	switch z {
	case ZeroAtOnce:
		return "0 is read as 1 (ms or byte)."
	case ZeroOff:
		return "0 means off."
	case ZeroDefault:
		return "0 means the default."
	}
	return ""
}

// Def is one setting. Tables hold a Def plus what only their package can
// say: where the value goes (a broker.Config, storage.Config or
// fetch.MirrorConfig field) and where its default comes from (that Go
// config's defaults, so a default is written once, in Go).
type Def struct {
	Name string
	// Type is the type DescribeConfigs reports; 0 for a server.properties
	// key that no config resource describes (its table's parser reads it).
	Type Type
	// Doc is one line of ASCII: `kmirror serve --help` prints it, and
	// DescribeConfigs v3+ returns it.
	Doc string
	// Check validates a value ("" is a value too); nil accepts any
	// string. Its error is "want ... (got ...)" (see the package doc).
	Check func(string) error
	// Dynamic settings may change at runtime (IncrementalAlterConfigs,
	// AlterConfigs); the others are read-only.
	Dynamic bool
	// Sensitive values are never sent back (DescribeConfigs answers null
	// and IsSensitive, as Kafka does for passwords).
	Sensitive bool
	// Synonyms are Kafka's synonyms: the other names that set the same
	// thing, strongest first. For a topic config, the broker config that
	// sets its default; for a mirror config, its other name (the
	// prototype's "mirror." prefixed one or the later unprefixed one).
	Synonyms []string
	// Zero is what 0 means (ZeroRefused for settings that refuse it or
	// are not numeric).
	Zero Zero
}

// Validate checks v with Check, naming the setting: the message of
// INVALID_CONFIG.
func (d *Def) Validate(v string) error {
	if d.Check == nil {
		return nil
	}
	if err := d.Check(v); err != nil {
		return fmt.Errorf("invalid value for %s: %w", d.Name, err)
	}
	return nil
}

// Synonym is the first synonym, "" for none.
func (d *Def) Synonym() string {
	if len(d.Synonyms) == 0 {
		return ""
	}
	return d.Synonyms[0]
}

// FullDoc is Doc with the meaning of 0, if it needs saying: a sentence
// after a Doc that is sentences (DescribeConfigs), a clause after one that
// is a phrase (--help).
func (d *Def) FullDoc() string {
	n := d.Zero.Note()
	switch {
	case n == "":
		return d.Doc
	case strings.HasSuffix(d.Doc, "."):
		return d.Doc + " " + n
	}
	return d.Doc + "; " + strings.TrimSuffix(n, ".")
}

// IsSensitive reports whether the value must never be sent back.
func (d *Def) IsSensitive() bool { return d.Sensitive || d.Type == Password }
