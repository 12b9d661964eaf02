package clientauth

import (
	"errors"
	"fmt"
	"strings"
)

// ParseJAAS parses a sasl.jaas.config value as Kafka does: one login
// module, its control flag, options as key=value (values quoted with
// double quotes, where \" and \\ escape, or bare words), and a closing
// semicolon:
//
//	org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cr=t";
//
// Error messages never quote option values: they may hold the password.
func ParseJAAS(s string) (module string, options map[string]string, err error) {
	p := jaasParser{s: s}
	if module, err = p.word("login module"); err != nil {
		return "", nil, err
	}
	flag, err := p.word("control flag")
	if err != nil {
		return "", nil, err
	}
	switch strings.ToLower(flag) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return "", nil, fmt.Errorf("control flag: want required, requisite, sufficient or optional, got %q", flag)
	}
	options = map[string]string{}
	for {
		p.space()
		if p.peek() == ';' {
			p.i++
			break
		}
		if p.done() {
			return "", nil, errors.New("missing the closing ';'")
		}
		key, err := p.word("option name")
		if err != nil {
			return "", nil, err
		}
		p.space()
		if p.peek() != '=' {
			return "", nil, fmt.Errorf("option %s: want key=value", key)
		}
		p.i++
		p.space()
		val, err := p.value(key)
		if err != nil {
			return "", nil, err
		}
		if _, dup := options[key]; dup {
			return "", nil, fmt.Errorf("option %s given twice", key)
		}
		options[key] = val
	}
	p.space()
	if !p.done() {
		return "", nil, errors.New("more than one login module (or text after ';'): a client takes one")
	}
	return module, options, nil
}

type jaasParser struct {
	s string
	i int
}

func (p *jaasParser) done() bool { return p.i >= len(p.s) }

func (p *jaasParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *jaasParser) space() {
	for !p.done() && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-$/:@", c) >= 0
}

// word reads a bare word (a class name, a flag, an option name).
func (p *jaasParser) word(what string) (string, error) {
	p.space()
	start := p.i
	for !p.done() && isWordByte(p.s[p.i]) {
		p.i++
	}
	if p.i == start {
		if p.done() {
			return "", fmt.Errorf("missing the %s", what)
		}
		return "", fmt.Errorf("%s: unexpected %q at offset %d", what, p.s[p.i], p.i)
	}
	return p.s[start:p.i], nil
}

// value reads a quoted or bare option value.
func (p *jaasParser) value(key string) (string, error) {
	if p.peek() != '"' {
		v, err := p.word("value of " + key)
		if err != nil {
			return "", fmt.Errorf("option %s: want a value", key)
		}
		return v, nil
	}
	p.i++
	var b strings.Builder
	for {
		if p.done() {
			return "", fmt.Errorf("option %s: unterminated quoted value", key)
		}
		c := p.s[p.i]
		p.i++
		switch c {
		case '"':
			return b.String(), nil
		case '\\':
			if p.done() {
				return "", fmt.Errorf("option %s: unterminated quoted value", key)
			}
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
}
