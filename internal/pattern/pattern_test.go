package pattern

import "testing"

// Patterns match whole names only, and an unbalanced pattern cannot break
// out of the full match.
func TestFullMatch(t *testing.T) {
	t.Parallel()
	res, err := CompileAll([]string{"orders", "pay.*"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"orders": true, "orders2": false, "xorders": false,
		"payments": true, "repay": false} {
		if got := MatchAny(res, name); got != want {
			t.Errorf("MatchAny(%q) = %v, want %v", name, got, want)
		}
	}
	for _, bad := range []string{")|(.*", "[a-", "(x"} {
		if _, err := CompileAll([]string{"ok", bad}); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}
