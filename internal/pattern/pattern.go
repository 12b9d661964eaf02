// Package pattern compiles the full-match regular expressions of Kafka's
// filter configs (topics.include, groups.exclude, acls.include fields,
// topic.properties.exclude...): a pattern must match a whole name, as
// Java's Pattern.matches does.
package pattern

import (
	"fmt"
	"regexp"
)

// Compile compiles p as a full-match regular expression. p is compiled
// alone first: an unbalanced p such as ")|(.*" would otherwise close the
// wrapping group early and turn the full match into a partial one.
func Compile(p string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(p); err != nil {
		return nil, err
	}
	return regexp.Compile("^(?:" + p + ")$")
}

// CompileAll compiles each pattern; the error names the pattern at fault.
func CompileAll(ps []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(ps))
	for _, p := range ps {
		re, err := Compile(p)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// MatchAny reports whether any of res matches s.
func MatchAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
