package props

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// p is shorthand for the expected properties.
func p(key, value string, line int) Property { return Property{Key: key, Value: value, Line: line} }

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []Property
	}{
		{"empty", "", nil},
		{"equals", "a=b", []Property{p("a", "b", 1)}},
		{"colon", "a: b", []Property{p("a", "b", 1)}},
		{"space", "a b", []Property{p("a", "b", 1)}},
		{"spaces around separator", "a \t = \f b", []Property{p("a", "b", 1)}},
		{"one separator only", "a = = b", []Property{p("a", "= b", 1)}},
		{"colon in value", "a=b:c=d", []Property{p("a", "b:c=d", 1)}},
		{"space then separator in value", "a b=c", []Property{p("a", "b=c", 1)}},
		{"key only", "a", []Property{p("a", "", 1)}},
		{"key and separator", "a=", []Property{p("a", "", 1)}},
		{"empty key", "=b", []Property{p("", "b", 1)}},
		{"trailing whitespace kept", "a=b \t", []Property{p("a", "b \t", 1)}},
		{"leading whitespace", "  \t\fa=b", []Property{p("a", "b", 1)}},
		{"comments and blanks", "# c\n! c\n\n   \n  # indented\na=b\n", []Property{p("a", "b", 6)}},
		{"hash inside value", "a=b#c", []Property{p("a", "b#c", 1)}},
		{"CRLF", "a=1\r\nb=2\r\n", []Property{p("a", "1", 1), p("b", "2", 2)}},
		{"CR only", "a=1\rb=2\r\rc=3", []Property{p("a", "1", 1), p("b", "2", 2), p("c", "3", 4)}},
		{"duplicates kept in order", "a=1\nb=2\na=3", []Property{p("a", "1", 1), p("b", "2", 2), p("a", "3", 3)}},
		{"BOM skipped", "\ufeffa=b", []Property{p("a", "b", 1)}},
		{"UTF-8 passed through", "a=caf\u00e9", []Property{p("a", "caf\u00e9", 1)}},

		{"continuation", "a=b\\\n   c\nd=e", []Property{p("a", "bc", 1), p("d", "e", 3)}},
		{"continuation CRLF", "a=b\\\r\n  c\r\n", []Property{p("a", "bc", 1)}},
		{"continuation of the key", "ke\\\n  y=v", []Property{p("key", "v", 1)}},
		{"continuation into hash", "a=b\\\n#c", []Property{p("a", "b#c", 1)}},
		{"even backslashes do not continue", "a=b\\\\\nc=d", []Property{p("a", `b\`, 1), p("c", "d", 2)}},
		{"three backslashes continue", "a=b\\\\\\\nc", []Property{p("a", `b\c`, 1)}},
		{"empty continuation ends the line", "a=b\\\n\nc=d", []Property{p("a", "b", 1), p("c", "d", 3)}},
		{"continuation at end of input", "a=b\\", []Property{p("a", "b", 1)}},
		{"comment not continued", "# c\\\na=b", []Property{p("a", "b", 2)}},
		{"lone backslash line", "\\\n# c\na=b", []Property{p("a", "b", 3)}},
		{"continued list", "dirs=/a,\\\n     /b,\\\n     /c\n", []Property{p("dirs", "/a,/b,/c", 1)}},

		{"escapes", `a=\t\n\r\f\\\=\:\#\!\ \q`, []Property{p("a", "\t\n\r\f\\=:#! q", 1)}},
		{"escaped separators in key", `a\=b\:c\ d=e`, []Property{p("a=b:c d", "e", 1)}},
		{"escaped leading space in value", `a=\  b`, []Property{p("a", "  b", 1)}},
		{"unicode escape", `a=\u0041\u00e9\u20AC`, []Property{p("a", "A\u00e9\u20ac", 1)}},
		{"surrogate pair", `a=\ud83d\ude00`, []Property{p("a", "\U0001F600", 1)}},
		{"lone surrogate", `a=\ud83dx`, []Property{p("a", "\ufffdx", 1)}},
		{"unicode newline", `a=x\u000ay`, []Property{p("a", "x\ny", 1)}},
		{"escape across a continuation", "a=\\u00\\\n  41", []Property{p("a", "A", 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse(%q)\n got %v\nwant %v", tt.in, got, tt.want)
			}
			// Reads that deliver one byte at a time must not matter.
			byByte, err := Parse(iotest.OneByteReader(strings.NewReader(tt.in)))
			if err != nil || !reflect.DeepEqual(byByte, got) {
				t.Fatalf("one byte at a time: %v, %v", byByte, err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		line int
		msg  string
	}{
		{"bad hex", "# c\n\na=\\u12G4", 3, `props: line 3: malformed \uXXXX escape "\\u12G4"`},
		{"short at end", "a=b\n\\u12", 2, `malformed \uXXXX escape "\\u12"`},
		{"in key", "k\\uzzzz=v", 1, `"\\uzzzz"`},
		{"names the continued line", "a=x,\\\n  y,\\\n  \\u00", 3, "props: line 3:"},
		{"empty escape", "a=\\u", 1, `"\\u"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(strings.NewReader(tt.in))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) = %v, %v; want a *SyntaxError", tt.in, got, err)
			}
			if se.Line != tt.line || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q (line %d); want line %d and %q", err, se.Line, tt.line, tt.msg)
			}
		})
	}
}

func TestParseReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	_, err := Parse(io.MultiReader(strings.NewReader("a=b\n"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "props: reading: ") {
		t.Fatalf("got %v, want a wrapped boom", err)
	}
}

func TestAppend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ps   []Property
		want string
	}{
		{"plain", []Property{p("log.dirs", "/a,/b", 7), p("num.partitions", "3", 9)}, "log.dirs=/a,/b\nnum.partitions=3\n"},
		{"empty", []Property{p("", "", 0)}, "=\n"},
		{"separators", []Property{p("a=b:c", "x=y:z", 0)}, `a\=b\:c=x\=y\:z` + "\n"},
		{"spaces", []Property{p(" a b", "  c d ", 0)}, `\ a\ b=\  c d ` + "\n"},
		{"comment starts", []Property{p("#a", "!b", 0)}, `\#a=\!b` + "\n"},
		{"controls", []Property{p("a\tb", "1\n2\r3\f", 0)}, `a\tb=1\n2\r3\f` + "\n"},
		{"backslash", []Property{p(`a\`, `C:\dir\`, 0)}, `a\\=C\:\\dir\\` + "\n"},
		{"BOM", []Property{p("\ufeffa", "b\ufeff", 0)}, `\ufeffa=b\ufeff` + "\n"},
		{"UTF-8 kept", []Property{p("a", "caf\u00e9", 0)}, "a=caf\u00e9\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := Append([]byte("# head\n"), tt.ps)
			if got := strings.TrimPrefix(string(out), "# head\n"); got != tt.want {
				t.Fatalf("Append = %q, want %q", got, tt.want)
			}
			back, err := Parse(strings.NewReader(string(out)))
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != len(tt.ps) {
				t.Fatalf("round trip: %v, want %v", back, tt.ps)
			}
			for i := range back {
				if back[i].Key != tt.ps[i].Key || back[i].Value != tt.ps[i].Value {
					t.Fatalf("round trip %d: %v, want %v", i, back[i], tt.ps[i])
				}
			}
		})
	}
}
