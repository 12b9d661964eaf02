// Package props reads and writes Java .properties files the way Kafka reads
// server.properties (java.util.Properties.load), so a Kafka operator's file
// means the same thing to kmirror.
//
// The grammar, as Java implements it:
//
//   - A natural line ends at \n, \r or \r\n. Leading spaces, tabs and form
//     feeds are skipped. A line that is then empty, or that starts with # or
//     !, is blank or a comment and yields nothing.
//   - A natural line ending in an odd number of backslashes continues on the
//     next one: the last backslash and the line break are dropped and so is
//     the next line's leading whitespace. A comment cannot be continued, but
//     a continuation line starting with # is content, not a comment. An
//     empty continuation line ends the logical line.
//   - The key runs to the first unescaped '=', ':', space, tab or form feed.
//     Whitespace, then at most one '=' or ':', then whitespace separate it
//     from the value, so "k=v", "k: v" and "k v" are the same. The value
//     keeps its trailing whitespace (Kafka trims values later, per type).
//   - Escapes in keys and values: \t \n \r \f, \uXXXX (UTF-16; a surrogate
//     pair makes one character), and a backslash before any other character
//     is that character (\\ \= \: \# \! and "\ " included).
//
// Deliberate differences from Java: input is UTF-8 and passed through byte
// for byte (Java's InputStream form reads ISO-8859-1, which turns UTF-8 into
// mojibake); a leading UTF-8 byte order mark is skipped, because editors on
// Windows write one and it would otherwise become part of the first key; and
// a continuation backslash alone on the last line yields nothing, where Java
// yields an empty key. Otherwise the two agree; the check was a differential
// run against java.util.Properties over random inputs.
//
// Parse keeps every property in file order, duplicates included: Java's
// last-one-wins is the caller's decision to make, and keeping the line
// numbers lets the caller name the line it rejects.
package props

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Property is one key/value pair. Line is the 1-based number of the natural
// line its logical line starts on.
type Property struct {
	Key, Value string
	Line       int
}

// String quotes the key and value, so logs and test failures show
// whitespace and control characters.
func (p Property) String() string { return fmt.Sprintf("%q=%q (line %d)", p.Key, p.Value, p.Line) }

// SyntaxError is input Parse cannot read. Line is the 1-based natural line
// holding the fault. Callers that report a file name use Line to say where.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("props: line %d: %s", e.Line, e.Msg) }

// utf8BOM is U+FEFF as UTF-8.
const utf8BOM = "\ufeff"

// Parse reads every property of r in order. The only syntax error is a
// malformed \uXXXX escape (Java refuses those too); read errors are wrapped.
func Parse(r io.Reader) ([]Property, error) {
	// Configuration files are small: reading all of it keeps line
	// continuation simple and costs nothing that matters.
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("props: reading: %w", err)
	}
	lr := lineReader{data: bytes.TrimPrefix(data, []byte(utf8BOM)), line: 1}
	var ps []Property
	var scratch []byte
	for lr.next() {
		keyEnd, valStart := split(lr.buf)
		var key, value string
		var err error
		if scratch, key, err = lr.decode(scratch, 0, keyEnd); err != nil {
			return nil, err
		}
		if scratch, value, err = lr.decode(scratch, valStart, len(lr.buf)); err != nil {
			return nil, err
		}
		ps = append(ps, Property{Key: key, Value: value, Line: lr.segs[0].line})
	}
	return ps, nil
}

// lineReader assembles logical lines (continuations joined) from natural
// lines, remembering where each natural line starts so an error deep in a
// continued line names the line the user sees.
type lineReader struct {
	data []byte
	off  int // next unread byte of data
	line int // number of the natural line starting at data[off]

	buf  []byte    // the current logical line, raw (escapes not decoded)
	segs []segment // the natural lines that make up buf, in order
}

// segment says that buf[at:] (up to the next segment) came from line.
type segment struct{ at, line int }

// natural returns the next natural line without its terminator, and its
// number. REQUIRES: off < len(data).
func (lr *lineReader) natural() ([]byte, int) {
	rest, n := lr.data[lr.off:], lr.line
	i := bytes.IndexAny(rest, "\r\n")
	if i < 0 {
		lr.off = len(lr.data)
		return rest, n
	}
	adv := i + 1
	if rest[i] == '\r' && adv < len(rest) && rest[adv] == '\n' {
		adv++
	}
	lr.off += adv
	lr.line++
	return rest[:i], n
}

// next assembles the next logical line into buf and segs; false at the end.
func (lr *lineReader) next() bool {
	lr.buf, lr.segs = lr.buf[:0], lr.segs[:0]
	for lr.off < len(lr.data) {
		text, n := lr.natural()
		text = bytes.TrimLeft(text, " \t\f")
		if len(lr.buf) == 0 {
			// Also reached after a line holding only a continuation
			// backslash: Java then treats the next line as a fresh start,
			// comment and blank checks included.
			lr.segs = lr.segs[:0]
			if len(text) == 0 || text[0] == '#' || text[0] == '!' {
				continue
			}
		} else if len(text) == 0 {
			return true // an empty continuation line ends the logical line
		}
		lr.segs = append(lr.segs, segment{at: len(lr.buf), line: n})
		lr.buf = append(lr.buf, text...)
		if !continues(text) {
			return true
		}
		lr.buf = lr.buf[:len(lr.buf)-1] // the continuation backslash is not content
	}
	// A continuation at the end of input just ends the line, as in Java.
	return len(lr.buf) > 0
}

// continues reports whether text ends in an odd number of backslashes: an
// even run is escaped backslashes, not a continuation.
func continues(text []byte) bool {
	n := len(text) - len(bytes.TrimRight(text, `\`))
	return n%2 == 1
}

// lineAt is the natural line holding buf[pos].
func (lr *lineReader) lineAt(pos int) int {
	line := lr.segs[0].line
	for _, s := range lr.segs {
		if s.at > pos {
			break
		}
		line = s.line
	}
	return line
}

// split finds the key, buf[:keyEnd], and the value, buf[valStart:], of a
// logical line, following Java's Properties.load0 step for step.
func split(buf []byte) (keyEnd, valStart int) {
	keyEnd, valStart = len(buf), len(buf)
	hasSep, escaped := false, false
	for i, c := range buf {
		if !escaped && (c == '=' || c == ':') {
			keyEnd, valStart, hasSep = i, i+1, true
			break
		}
		if !escaped && isSpace(c) {
			keyEnd, valStart = i, i+1
			break
		}
		escaped = c == '\\' && !escaped
	}
	for ; valStart < len(buf); valStart++ {
		c := buf[valStart]
		if isSpace(c) {
			continue
		}
		// "k = v" and "k  :v": one separator may follow the whitespace.
		if hasSep || (c != '=' && c != ':') {
			break
		}
		hasSep = true
	}
	return keyEnd, valStart
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

// decode decodes the escapes of buf[from:to] into a string, using scratch
// as the work buffer (returned for reuse).
func (lr *lineReader) decode(scratch []byte, from, to int) ([]byte, string, error) {
	s := lr.buf[from:to]
	if bytes.IndexByte(s, '\\') < 0 {
		return scratch, string(s), nil // the common case: nothing to decode
	}
	out := scratch[:0]
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 == len(s) {
			// Unreachable: a logical line never ends in an odd run of
			// backslashes, and the key ends before an unescaped separator.
			// Dropping the backslash is what Java's reader would do.
			break
		}
		switch c = s[i+1]; c {
		case 't':
			out = append(out, '\t')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 'f':
			out = append(out, '\f')
		case 'u':
			r, ok := hex4(s[i+2:])
			if !ok {
				bad := s[i:min(len(s), i+6)]
				return out, "", &SyntaxError{Line: lr.lineAt(from + i), Msg: fmt.Sprintf(`malformed \uXXXX escape %q`, bad)}
			}
			i += 6
			// A high surrogate followed by an escaped low one is a single
			// character outside the BMP (Java strings are UTF-16). A lone
			// surrogate has no UTF-8 form and becomes U+FFFD.
			if utf16.IsSurrogate(r) && r < 0xdc00 && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if lo, ok := hex4(s[i+2:]); ok && lo >= 0xdc00 && lo <= 0xdfff {
					r = utf16.DecodeRune(r, lo)
					i += 6
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			out = append(out, c) // \\ \= \: \# \! "\ " and any other: the character itself
		}
		i += 2
	}
	return out, string(out), nil
}

// hex4 reads four hex digits, as Java's \u escape requires exactly four.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// Append appends ps to dst as key=value lines that Parse reads back to the
// same keys and values (Line is not written: each property gets one line).
// It escapes only what Parse would otherwise read differently, so ordinary
// settings stay readable; non-ASCII text is written as UTF-8, which Parse
// reads but Java's InputStream form would not.
func Append(dst []byte, ps []Property) []byte {
	for _, p := range ps {
		dst = appendEscaped(dst, p.Key, true)
		dst = append(dst, '=')
		dst = appendEscaped(dst, p.Value, false)
		dst = append(dst, '\n')
	}
	return dst
}

// appendEscaped appends s with backslash escapes for line breaks, the
// separators, comment starts and backslashes. Spaces are escaped everywhere
// in a key (they end it) and at the start of a value (they would be
// skipped). A U+FEFF is escaped because at the start of a file Parse skips it.
func appendEscaped(dst []byte, s string, key bool) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\', '=', ':', '#', '!':
			dst = append(dst, '\\', c)
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\f':
			dst = append(dst, '\\', 'f')
		case ' ':
			if key || i == 0 {
				dst = append(dst, '\\')
			}
			dst = append(dst, ' ')
		default:
			if strings.HasPrefix(s[i:], utf8BOM) {
				dst = append(dst, `\ufeff`...)
				i += len(utf8BOM) - 1
				continue
			}
			dst = append(dst, c)
		}
	}
	return dst
}
