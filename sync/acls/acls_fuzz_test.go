package acls

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/state"
)

// FuzzParseRules: ParseRules never panics, fails only with ErrInvalidRule,
// always yields a rule, and what parses reads back from its String form
// as the same rules (the form the control plane may log or store). Match
// is run on a few bindings to shake out panics in the compiled regexes.
func FuzzParseRules(f *testing.F) {
	for _, s := range []string{
		"", "*", "TOPIC", "topic;orders\\..*;read;allow;User:alice",
		" group ; g.* , cluster;*;cluster_action ", "TOPIC,", ",,",
		"Transactional_Id;*;Describe;DENY", "*;*;ALL", "USER;*;CREATE_TOKENS;*;(?i)user:a",
		"TOPICS", "TOPIC;(", "TOPIC;)|(.*", "TOPIC;*;READ;ALLOW;*;extra", "TOPIC;;READ", ";",
		"DELEGATION_TOKEN;[a-z]+\\d{2};describe_tokens;deny;User:.*",
	} {
		f.Add(s)
	}
	probes := []state.ACL{
		{ResourceType: 2, ResourceName: "orders", PatternType: 3, Principal: "User:alice", Host: "*",
			Operation: 3, Permission: 3},
		{ResourceType: 3, ResourceName: "g\x00\xff", PatternType: 4, Principal: "", Host: "",
			Operation: 2, Permission: 2},
	}
	f.Fuzz(func(t *testing.T, include string) {
		rules, err := ParseRules(include)
		if err != nil {
			if !errors.Is(err, ErrInvalidRule) {
				t.Fatalf("ParseRules(%q): %v is not ErrInvalidRule", include, err)
			}
			return
		}
		if len(rules) == 0 {
			t.Fatalf("ParseRules(%q): no rules", include)
		}
		strs := ruleStrings(rules)
		again, err := ParseRules(strings.Join(strs, ","))
		if err != nil {
			t.Fatalf("ParseRules(%q) -> %q does not parse back: %v", include, strs, err)
		}
		if got := ruleStrings(again); !slices.Equal(got, strs) {
			t.Fatalf("ParseRules(%q) -> %q -> %q", include, strs, got)
		}
		for _, p := range probes {
			for i, r := range rules {
				if r.Match(p) != again[i].Match(p) {
					t.Fatalf("rule %q and its re-parse disagree on %v", strs[i], p)
				}
			}
		}
	})
}
