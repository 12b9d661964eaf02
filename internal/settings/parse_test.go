package settings

import (
	"math"
	"slices"
	"testing"
)

func TestParseInt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v      string
		lo, hi int64
		want   int64
		err    string
	}{
		{"7", 0, 10, 7, ""},
		{"-3", -5, 10, -3, ""},
		{"+4", 0, 10, 4, ""},
		{"x", 1, 10, 0, `want an integer >= 1 (got "x")`},
		{"0", 1, 10, 0, `want an integer >= 1 (got "0")`},
		{"11", 1, 10, 0, `want an integer <= 10 (got "11")`},
		{"1.5", math.MinInt64, math.MaxInt64, 0, `want an integer (got "1.5")`},
		{"99999999999999999999", 0, math.MaxInt32, 0, `want an integer <= 2147483647 (got "99999999999999999999")`},
		{"9223372036854775807", 0, math.MaxInt64, math.MaxInt64, ""},
		{"9223372036854775808", 0, math.MaxInt64, 0, `want an integer <= 9223372036854775807 (got "9223372036854775808")`},
		{"-9223372036854775809", math.MinInt64, math.MaxInt64, 0, `want an integer (got "-9223372036854775809")`},
	} {
		n, err := ParseInt(tc.v, tc.lo, tc.hi)
		if msg := errString(err); n != tc.want || msg != tc.err {
			t.Errorf("ParseInt(%q, %d, %d) = %d, %q; want %d, %q", tc.v, tc.lo, tc.hi, n, msg, tc.want, tc.err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// AtLeast bounds a value by its type's width: a 32-bit INT refuses what a
// LONG takes.
func TestAtLeast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ  Type
		lo   int64
		v    string
		want string
	}{
		{Int, 0, "2147483647", ""},
		{Int, 0, "2147483648", `want an integer <= 2147483647 (got "2147483648")`},
		{Long, 0, "2147483648", ""},
		{Short, 1, "32768", `want an integer <= 32767 (got "32768")`},
		{Long, -1, "-2", `want an integer >= -1 (got "-2")`},
	} {
		if got := errString(AtLeast(tc.typ, tc.lo)(tc.v)); got != tc.want {
			t.Errorf("AtLeast(%v, %d)(%q) = %q, want %q", tc.typ, tc.lo, tc.v, got, tc.want)
		}
	}
}

func TestChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		check func(string) error
		v     string
		want  string
	}{
		{"bool", CheckBool, "TRUE", ""},
		{"bool", CheckBool, "yes", `want true or false (got "yes")`},
		{"one of", OneOf("a", "b"), "b", ""},
		{"one of", OneOf("a", "b"), "A", `want one of a, b (got "A")`},
		{"ratio", Ratio, "0.5", ""},
		{"ratio", Ratio, "1.5", `want a number in [0, 1] (got "1.5")`},
		{"ratio", Ratio, "NaN", `want a number in [0, 1] (got "NaN")`},
	} {
		if got := errString(tc.check(tc.v)); got != tc.want {
			t.Errorf("%s(%q) = %q, want %q", tc.name, tc.v, got, tc.want)
		}
	}
}

func TestSplitList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v            string
		split, items []string
	}{
		{"", nil, nil},
		{"a", []string{"a"}, []string{"a"}},
		{" a , b ,", []string{"a", "b", ""}, []string{"a", "b"}},
		{",,", []string{"", "", ""}, nil},
	} {
		if got := SplitList(tc.v); !slices.Equal(got, tc.split) {
			t.Errorf("SplitList(%q) = %q, want %q", tc.v, got, tc.split)
		}
		if got := Items(tc.v); !slices.Equal(got, tc.items) {
			t.Errorf("Items(%q) = %q, want %q", tc.v, got, tc.items)
		}
	}
}

// TypeError answers with the words of Kafka's ConfigDef.parseType.
func TestTypeError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ  Type
		v    string
		want string
	}{
		{Int, " 12 ", ""},
		{Int, "abc", "Not a number of type INT"},
		{Int, "2147483648", "Not a number of type INT"},
		{Short, "40000", "Not a number of type SHORT"},
		{Long, "1.5", "Not a number of type LONG"},
		{Double, "x", "Not a number of type DOUBLE"},
		{Boolean, "yes", "Expected value to be either true or false"},
		{String, "anything", ""},
	} {
		if got := TypeError(tc.typ, tc.v); got != tc.want {
			t.Errorf("TypeError(%v, %q) = %q, want %q", tc.typ, tc.v, got, tc.want)
		}
	}
}

func TestZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		z    Zero
		n    int64
		want int64
	}{
		{ZeroAtOnce, 0, 1}, {ZeroAtOnce, 5, 5}, {ZeroLiteral, 0, 0}, {ZeroOff, 0, 0}, {ZeroDefault, 0, 0},
	} {
		if got := tc.z.Of(tc.n); got != tc.want {
			t.Errorf("Zero(%d).Of(%d) = %d, want %d", tc.z, tc.n, got, tc.want)
		}
	}
	d := Def{Name: "x.ms", Doc: "How long.", Zero: ZeroOff}
	if got := d.FullDoc(); got != "How long. 0 means off." {
		t.Errorf("FullDoc = %q", got)
	}
	d.Doc = "how long, an integer >= 0"
	if got := d.FullDoc(); got != "how long, an integer >= 0; 0 means off" {
		t.Errorf("FullDoc of a phrase = %q", got)
	}
	d.Check = AtLeast(Long, 1)
	if got := errString(d.Validate("0")); got != `invalid value for x.ms: want an integer >= 1 (got "0")` {
		t.Errorf("Validate = %q", got)
	}
}
