package settings

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ParseInt reads a base-10 integer in [lo, hi] (Java's Integer/Long.parseInt
// accept the same forms as strconv: an optional sign, then digits). Below
// lo or not a number: "want an integer >= lo (got v)", or "want an integer
// (got v)" when lo is no bound; above hi: "want an integer <= hi (got v)".
func ParseInt(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	over := false
	if errors.Is(err, strconv.ErrRange) {
		// n is clamped to the int64 range: the bounds below catch it, and
		// a number past int64 is refused even where the bound is int64's,
		// as Java's Long.parseLong refuses it.
		err, over = nil, true
	}
	switch {
	case err != nil || n < lo || over && n < 0:
		if lo <= math.MinInt32 {
			return 0, fmt.Errorf("want an integer (got %q)", v)
		}
		return 0, fmt.Errorf("want an integer >= %d (got %q)", lo, v)
	case n > hi || over:
		return 0, fmt.Errorf("want an integer <= %d (got %q)", hi, v)
	}
	return n, nil
}

// Int32 reads a Kafka INT value, Int64 a LONG one, each at least lo.
func Int32(v string, lo int64) (int32, error) {
	n, err := ParseInt(v, lo, math.MaxInt32)
	return int32(n), err
}

func Int64(v string, lo int64) (int64, error) { return ParseInt(v, lo, math.MaxInt64) }

// MaxOf is the largest value of an integer type (Short, Int, Long; Long
// for any other).
func MaxOf(t Type) int64 {
	switch t {
	case Short:
		return math.MaxInt16
	case Int:
		return math.MaxInt32
	}
	return math.MaxInt64
}

// AtLeast checks an integer of type t (its width bounds it above) that is
// at least lo.
func AtLeast(t Type, lo int64) func(string) error {
	hi := MaxOf(t)
	return func(v string) error {
		_, err := ParseInt(v, lo, hi)
		return err
	}
}

// MustInt parses a value its Check accepted (0 for any other).
func MustInt(v string) int64 {
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// ParseBool accepts what Kafka's ConfigDef accepts: true or false in any
// case.
func ParseBool(v string) (bool, error) {
	switch {
	case strings.EqualFold(v, "true"):
		return true, nil
	case strings.EqualFold(v, "false"):
		return false, nil
	}
	return false, fmt.Errorf("want true or false (got %q)", v)
}

// CheckBool is ParseBool as a Check.
func CheckBool(v string) error {
	_, err := ParseBool(v)
	return err
}

// OneOf checks that a value is one of values, exactly.
func OneOf(values ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("want one of %s (got %q)", strings.Join(values, ", "), v)
		}
		return nil
	}
}

// Ratio checks a number in [0, 1].
func Ratio(v string) error {
	if f, err := strconv.ParseFloat(v, 64); err != nil || !(f >= 0 && f <= 1) {
		return fmt.Errorf("want a number in [0, 1] (got %q)", v)
	}
	return nil
}

// SplitList splits a Kafka LIST value as ConfigDef does: items separated
// by commas with any whitespace around them, nil for an empty value.
// Empty items are kept (Kafka keeps them too); each caller decides whether
// they are an error, or drops them with Items.
func SplitList(v string) []string {
	if v == "" {
		return nil
	}
	items := strings.Split(v, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

// Items is SplitList without the empty items.
func Items(v string) []string {
	var out []string
	for _, s := range SplitList(v) {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TypeError is Kafka's ConfigDef.parseType check of a value's form: the
// reason after "Invalid value <v> for configuration <name>: ", "" if the
// value has the type's form. Like Java, the value is trimmed first.
func TypeError(t Type, v string) string {
	v = strings.TrimSpace(v)
	var bits int
	switch t {
	case Boolean:
		if _, err := ParseBool(v); err != nil {
			return "Expected value to be either true or false"
		}
		return ""
	case Short:
		bits = 16
	case Int:
		bits = 32
	case Long:
		bits = 64
	case Double:
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return "Not a number of type DOUBLE"
		}
		return ""
	default:
		return ""
	}
	if _, err := strconv.ParseInt(v, 10, bits); err != nil {
		return "Not a number of type " + t.String()
	}
	return ""
}
