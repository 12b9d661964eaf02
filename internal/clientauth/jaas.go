package clientauth

import (
	"errors"
	"fmt"
	"strings"
)

// ParseJAAS parses a sasl.jaas.config value as Kafka does: one login
// module, its control flag, options as key=value, and a closing semicolon:
//
//	org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cr=t";
//
// Values are quoted with double or single quotes (a backslash escapes the
// next byte) or bare words of any printable byte but ; = " ' / and
// space, as Kafka's tokenizer reads them.
//
// Error messages never quote option values, nor anything that might be
// one: a password given unquoted with a space in it must not end up in a
// log. Options are named in errors only when they are names Kafka's login
// modules define, else by position.
func ParseJAAS(s string) (module string, options map[string]string, err error) {
	p := jaasParser{s: s}
	if module, err = p.word(); err != nil {
		return "", nil, fmt.Errorf("missing the login module: %w", err)
	}
	flag, err := p.word()
	if err != nil {
		return "", nil, fmt.Errorf("missing the control flag: %w", err)
	}
	switch strings.ToLower(flag) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return "", nil, errors.New("control flag: want required, requisite, sufficient or optional")
	}
	options = map[string]string{}
	for n := 1; ; n++ {
		p.space()
		if p.peek() == ';' {
			p.i++
			break
		}
		if p.done() {
			return "", nil, errors.New("missing the closing ';'")
		}
		key, err := p.word()
		if err == nil {
			p.space()
			if p.peek() != '=' {
				err = errors.New("want key=value (quote values that hold spaces)")
			}
		}
		if err != nil {
			return "", nil, fmt.Errorf("option %d: %w", n, err)
		}
		p.i++
		p.space()
		val, err := p.value()
		if err != nil {
			return "", nil, fmt.Errorf("option %s: %w", optionName(key, n), err)
		}
		if _, dup := options[key]; dup {
			return "", nil, fmt.Errorf("option %s given twice", optionName(key, n))
		}
		options[key] = val
	}
	p.space()
	if !p.done() {
		return "", nil, errors.New("more than one login module (or text after ';'): a client takes one")
	}
	return module, options, nil
}

// optionName names option n in an error: by its name if Kafka's login
// modules define it, else by position.
func optionName(key string, n int) string {
	switch key {
	case "username", "password", "tokenauth", "serviceName", "debug":
		return key
	}
	return fmt.Sprint(n)
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

// isWordByte is a byte of a bare word: any printable byte but the quotes,
// ';', '=' and '/' (Kafka's tokenizer reads '/' as a comment).
func isWordByte(c byte) bool {
	return c > ' ' && c < 0x7f && strings.IndexByte(";=\"'/", c) < 0
}

// word reads a bare word. Its error never quotes the input.
func (p *jaasParser) word() (string, error) {
	p.space()
	start := p.i
	for !p.done() && isWordByte(p.s[p.i]) {
		p.i++
	}
	if p.i == start {
		if p.done() {
			return "", errors.New("unexpected end")
		}
		return "", fmt.Errorf("unexpected character at offset %d", p.i)
	}
	return p.s[start:p.i], nil
}

// value reads a quoted or bare option value.
func (p *jaasParser) value() (string, error) {
	quote := p.peek()
	if quote != '"' && quote != '\'' {
		v, err := p.word()
		if err != nil {
			return "", errors.New("want a value")
		}
		return v, nil
	}
	p.i++
	var b strings.Builder
	for {
		if p.done() {
			return "", errors.New("unterminated quoted value")
		}
		c := p.s[p.i]
		p.i++
		switch c {
		case quote:
			return b.String(), nil
		case '\\':
			if p.done() {
				return "", errors.New("unterminated quoted value")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
}
