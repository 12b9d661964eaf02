package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Readers of the files under deploy/ (the Grafana dashboard and the
// Prometheus rules) for TestDeployQueriesExportedMetrics: the PromQL
// expressions they hold and the metric names those query. No PromQL or
// YAML library is a dependency of the module, and neither is worth one: a
// tokenizer finds metric names, and the rules file keeps to the plain
// block subset of YAML that the reader below understands (it refuses
// anything else, so a rules file it accepts has the shape it checked).

// promqlWords are PromQL's keywords and aggregation operators: an
// identifier among them is never a metric name.
var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"offset": true, "bool": true, "and": true, "or": true, "unless": true, "atan2": true, "inf": true, "nan": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

// labelLists are the keywords followed by a parenthesised list of label
// names.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
func isIdent(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }

// promqlMetrics returns the metric names expr selects: identifiers that are
// neither keywords, functions (followed by "("), label names (inside {} and
// after by, without, on, ignoring, group_left, group_right), durations
// (inside []), strings, numbers nor Grafana variables ($x, ${x}). Of
// Grafana's label_values(metric, label) only the first argument names a
// metric. It fails on unbalanced brackets or quotes.
func promqlMetrics(expr string) ([]string, error) {
	var out []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipQuoted(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := closing(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				end, err := closing(expr, i)
				if err != nil {
					return nil, err
				}
				i = end
			}
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
		case '0' <= c && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++ // 0.10, 1e3, 0x1f, and durations such as 5m after offset
			}
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			word, k := expr[i:j], j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			paren := k < len(expr) && expr[k] == '('
			i = j
			switch {
			case labelLists[word] && paren:
				end, err := closing(expr, k)
				if err != nil {
					return nil, err
				}
				i = end
			case promqlWords[word]:
			case word == "label_values" && paren:
				end, err := closing(expr, k)
				if err != nil {
					return nil, err
				}
				if arg, _, ok := strings.Cut(expr[k+1:end-1], ","); ok {
					ms, err := promqlMetrics(arg)
					if err != nil {
						return nil, err
					}
					out = append(out, ms...)
				}
				i = end
			case paren: // a function
			default:
				out = append(out, word)
			}
		case c == '(' || c == ')' || c == '}' || c == ']':
			if c != '(' && c != ')' {
				return nil, fmt.Errorf("unbalanced %q at %d", c, i)
			}
			i++
		default:
			i++
		}
	}
	if strings.Count(expr, "(") != strings.Count(expr, ")") {
		return nil, fmt.Errorf("unbalanced parentheses")
	}
	return out, nil
}

// skipQuoted returns the index after the string literal starting at i.
func skipQuoted(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at %d", i)
}

// closing returns the index after the bracket matching the one at i,
// skipping string literals.
func closing(s string, i int) (int, error) {
	pairs := map[byte]byte{'(': ')', '{': '}', '[': ']'}
	want := []byte{pairs[s[i]]}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipQuoted(s, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case pairs[c] != 0:
			want = append(want, pairs[c])
		case c == ')' || c == '}' || c == ']':
			if c != want[len(want)-1] {
				return 0, fmt.Errorf("%q at %d closes nothing open", c, j)
			}
			want = want[:len(want)-1]
			if len(want) == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("%q at %d is never closed", s[i], i)
}

// dashboardQueries returns the PromQL of a Grafana dashboard: every
// target's "expr" and every templating variable's query, keyed by where
// they are.
func dashboardQueries(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			return nil, fmt.Errorf("%s: panel %q queries nothing", path, p.Title)
		}
		for i, t := range p.Targets {
			if t.Expr == "" {
				return nil, fmt.Errorf("%s: panel %q target %d has no expr", path, p.Title, i)
			}
			out[fmt.Sprintf("panel %q target %d", p.Title, i)] = t.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil || q.Query == "" {
			return nil, fmt.Errorf("%s: variable %s: want a query object: %v", path, v.Name, err)
		}
		out["variable "+v.Name] = q.Query
	}
	return out, nil
}

// yamlNode is a node of the YAML block subset: a scalar, a mapping (keys
// in order) or a sequence.
type yamlNode struct {
	scalar *string
	keys   []string
	m      map[string]*yamlNode
	list   []*yamlNode
}

type yamlLine struct {
	n      int // line number
	indent int
	text   string
}

// parseYAMLSubset reads block mappings ("key: value", "key:" with a
// deeper block under it), block sequences ("- " items) and scalars (plain,
// "double" or 'single' quoted), with full-line comments. Anything else
// (flow collections, anchors, block scalars, tabs, a comment after a
// value) is an error.
func parseYAMLSubset(src string) (*yamlNode, error) {
	var lines []yamlLine
	for i, l := range strings.Split(src, "\n") {
		t := strings.TrimLeft(l, " ")
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if strings.ContainsAny(l, "\t") {
			return nil, fmt.Errorf("line %d: a tab", i+1)
		}
		lines = append(lines, yamlLine{n: i + 1, indent: len(l) - len(t), text: strings.TrimRight(t, " ")})
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("empty document")
	}
	node, next, err := yamlBlock(lines, 0, lines[0].indent)
	if err == nil && next < len(lines) {
		err = fmt.Errorf("line %d: unexpected indentation", lines[next].n)
	}
	return node, err
}

// yamlBlock parses the block at indent starting at lines[i].
func yamlBlock(lines []yamlLine, i, indent int) (*yamlNode, int, error) {
	if strings.HasPrefix(lines[i].text+" ", "- ") {
		node := &yamlNode{list: []*yamlNode{}}
		for i < len(lines) && lines[i].indent == indent && strings.HasPrefix(lines[i].text+" ", "- ") {
			// "- key: v" is a mapping item whose first line sits two
			// columns deeper.
			item := strings.TrimPrefix(strings.TrimPrefix(lines[i].text, "-"), " ")
			if item == "" {
				return nil, 0, fmt.Errorf("line %d: an empty sequence item", lines[i].n)
			}
			sub := append([]yamlLine{{n: lines[i].n, indent: indent + 2, text: item}}, lines[i+1:]...)
			child, next, err := yamlBlock(sub, 0, indent+2)
			if err != nil {
				return nil, 0, err
			}
			node.list = append(node.list, child)
			i += next
		}
		return node, i, nil
	}
	if !strings.Contains(lines[i].text, ":") {
		s, err := yamlScalar(lines[i])
		return &yamlNode{scalar: &s}, i + 1, err
	}
	node := &yamlNode{m: map[string]*yamlNode{}}
	for i < len(lines) && lines[i].indent == indent {
		l := lines[i]
		key, rest, ok := strings.Cut(l.text, ":")
		if !ok || key == "" || strings.ContainsAny(key, " \"'{}[]&*!|>%@`") {
			return nil, 0, fmt.Errorf("line %d: want key: value, got %q", l.n, l.text)
		}
		if _, dup := node.m[key]; dup {
			return nil, 0, fmt.Errorf("line %d: key %s twice", l.n, key)
		}
		node.keys = append(node.keys, key)
		rest = strings.TrimLeft(rest, " ")
		if rest != "" {
			s, err := yamlScalar(yamlLine{n: l.n, text: rest})
			if err != nil {
				return nil, 0, err
			}
			node.m[key] = &yamlNode{scalar: &s}
			i++
			continue
		}
		if i+1 >= len(lines) || lines[i+1].indent < indent ||
			lines[i+1].indent == indent && !strings.HasPrefix(lines[i+1].text, "- ") {
			return nil, 0, fmt.Errorf("line %d: key %s has no value", l.n, key)
		}
		child, next, err := yamlBlock(lines, i+1, lines[i+1].indent)
		if err != nil {
			return nil, 0, err
		}
		node.m[key] = child
		i = next
	}
	if i < len(lines) && lines[i].indent > indent {
		return nil, 0, fmt.Errorf("line %d: unexpected indentation", lines[i].n)
	}
	return node, i, nil
}

// yamlScalar reads a plain or quoted scalar.
func yamlScalar(l yamlLine) (string, error) {
	t := l.text
	switch {
	case strings.HasPrefix(t, `"`):
		s, err := strconv.Unquote(t)
		if err != nil {
			return "", fmt.Errorf("line %d: %q: %w", l.n, t, err)
		}
		return s, nil
	case strings.HasPrefix(t, "'"):
		if len(t) < 2 || !strings.HasSuffix(t, "'") {
			return "", fmt.Errorf("line %d: unterminated %q", l.n, t)
		}
		return strings.ReplaceAll(t[1:len(t)-1], "''", "'"), nil
	case strings.ContainsAny(t[:1], "{[&*!|>%@`#") || strings.Contains(t, " #") || strings.Contains(t, ": "):
		return "", fmt.Errorf("line %d: %q is outside the YAML subset read here", l.n, t)
	}
	return t, nil
}

var ruleDuration = regexp.MustCompile(`^[0-9]+(ms|s|m|h|d|w|y)$`)

// ruleQueries checks a Prometheus rules file's shape (groups of named
// rules, each an alert or a record with an expr, a for duration, string
// labels and annotations, alerts with a severity and a summary) and
// returns its expressions by rule name.
func ruleQueries(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := parseYAMLSubset(string(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: "+format, append([]any{path}, args...)...)
	}
	if doc.m == nil || len(doc.keys) != 1 || doc.m["groups"] == nil || doc.m["groups"].list == nil {
		return nil, bad("want a mapping of groups only")
	}
	str := func(n *yamlNode) (string, bool) {
		if n == nil || n.scalar == nil {
			return "", false
		}
		return *n.scalar, true
	}
	out := map[string]string{}
	groups := map[string]bool{}
	for gi, g := range doc.m["groups"].list {
		name, ok := str(g.m["name"])
		if !ok || name == "" || groups[name] || g.m["rules"] == nil || len(g.m["rules"].list) == 0 {
			return nil, bad("group %d: want a new name and rules", gi)
		}
		groups[name] = true
		for _, k := range g.keys {
			if k != "name" && k != "rules" && k != "interval" {
				return nil, bad("group %s: unknown key %s", name, k)
			}
		}
		for ri, r := range g.m["rules"].list {
			if r.m == nil {
				return nil, bad("group %s rule %d: not a mapping", name, ri)
			}
			alert, isAlert := str(r.m["alert"])
			record, isRecord := str(r.m["record"])
			expr, hasExpr := str(r.m["expr"])
			rule := alert + record
			if isAlert == isRecord || rule == "" || !hasExpr || expr == "" || out[rule] != "" {
				return nil, bad("group %s rule %d: want one new alert or record name and an expr", name, ri)
			}
			for _, k := range r.keys {
				switch k {
				case "alert", "record", "expr":
				case "for", "keep_firing_for":
					if d, ok := str(r.m[k]); !ok || !ruleDuration.MatchString(d) {
						return nil, bad("rule %s: %s is no duration", rule, k)
					}
				case "labels", "annotations":
					if r.m[k].m == nil {
						return nil, bad("rule %s: %s is no mapping", rule, k)
					}
					for _, lk := range r.m[k].keys {
						if _, ok := str(r.m[k].m[lk]); !ok {
							return nil, bad("rule %s: %s.%s is no string", rule, k, lk)
						}
					}
				default:
					return nil, bad("rule %s: unknown key %s", rule, k)
				}
			}
			if isAlert {
				sev, _ := str(r.m["labels"].lookup("severity"))
				sum, _ := str(r.m["annotations"].lookup("summary"))
				if sev == "" || sum == "" {
					return nil, bad("alert %s: want labels.severity and annotations.summary", rule)
				}
			}
			out[rule] = expr
		}
	}
	return out, nil
}

// lookup is n's value for key, nil when n is no mapping or lacks it.
func (n *yamlNode) lookup(key string) *yamlNode {
	if n == nil || n.m == nil {
		return nil
	}
	return n.m[key]
}
