package settings

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// FuzzValues feeds config values, as they arrive from server.properties and
// from AlterConfigs, CreateTopics and the mirror RPCs, to every parser and
// check: none may panic, and each answer must agree with strconv.
func FuzzValues(f *testing.F) {
	for _, s := range []string{"", "0", "-1", "+7", "2147483648", "9223372036854775808", "-9223372036854775809",
		"1.5", "NaN", "true", "FALSE", "a, b,,c", " 12 ", "compact,delete", "\x00", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := ParseInt(v, -1, math.MaxInt32)
		if err == nil {
			if want, perr := strconv.ParseInt(v, 10, 64); perr != nil || n != want || n < -1 || n > math.MaxInt32 {
				t.Fatalf("ParseInt(%q) = %d", v, n)
			}
		} else if !strings.HasPrefix(err.Error(), "want ") {
			t.Fatalf("ParseInt(%q): message %q", v, err)
		}
		for _, typ := range []Type{Boolean, String, Int, Short, Long, Double, List, Class, Password} {
			msg := TypeError(typ, v)
			if typ == Int && (msg == "") != (AtLeast(Int, math.MinInt32)(strings.TrimSpace(v)) == nil) {
				t.Fatalf("TypeError(INT, %q) = %q disagrees with AtLeast", v, msg)
			}
		}
		if b, err := ParseBool(v); err == nil && b != strings.EqualFold(v, "true") {
			t.Fatalf("ParseBool(%q) = %v", v, b)
		}
		_ = Ratio(v)
		_ = OneOf("a", "b")(v)
		items := Items(v)
		for _, it := range items {
			if it == "" || strings.Contains(it, ",") || strings.TrimSpace(it) != it {
				t.Fatalf("Items(%q) has %q", v, it)
			}
		}
		if split := SplitList(v); len(split) < len(items) || v != "" && len(split) != strings.Count(v, ",")+1 {
			t.Fatalf("SplitList(%q) = %q", v, split)
		}
	})
}
