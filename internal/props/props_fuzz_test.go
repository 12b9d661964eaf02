package props

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"
)

// FuzzParse: any input parses without panicking, to the same result however
// the reads are split; every line number lies inside the input and never
// goes backwards; a failure is a *SyntaxError naming a line inside the
// input; and what Append writes parses back to the same keys and values, one
// line per property.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"",
		"# Kafka server.properties\nprocess.roles=broker,controller\nnode.id=1\n",
		"listeners=PLAINTEXT://:9092,CONTROLLER://:9093\nlog.dirs=/tmp/kraft-combined-logs\n",
		"a: b\nc d\n  e\t=\tf  \n",
		"a=b\\\n   c\\\r\n\td\n",
		"a=\\u0041\\ud83d\\ude00\\u12G4",
		"k\\ ey=\\ v\\=\\:\\#\\!\\t\\n\\r\\f\\\\",
		"\ufeff!comment\r\n\\\n#x\ny=z\\",
		"a=\\u00\\\n  41\n\n\\\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		lines := 1 + bytes.Count(in, []byte("\n")) + bytes.Count(in, []byte("\r")) - bytes.Count(in, []byte("\r\n"))
		ps, err := Parse(bytes.NewReader(in))

		// The nats trick: the same bytes in two reads, then one byte per read.
		half := len(in) / 2
		split, splitErr := Parse(io.MultiReader(bytes.NewReader(in[:half]), bytes.NewReader(in[half:])))
		byByte, byByteErr := Parse(iotest.OneByteReader(bytes.NewReader(in)))
		if !slices.Equal(ps, split) || !slices.Equal(ps, byByte) ||
			errString(err) != errString(splitErr) || errString(err) != errString(byByteErr) {
			t.Fatalf("split reads differ: %v/%v, %v/%v, %v/%v", ps, err, split, splitErr, byByte, byByteErr)
		}

		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *SyntaxError", err)
			}
			if se.Line < 1 || se.Line > lines {
				t.Fatalf("error line %d outside 1..%d", se.Line, lines)
			}
			return
		}
		prev := 1
		for _, p := range ps {
			if p.Line < prev || p.Line > lines {
				t.Fatalf("property %q at line %d: want %d..%d", p.Key, p.Line, prev, lines)
			}
			prev = p.Line
		}

		out := Append(nil, ps)
		back, err := Parse(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", out, err)
		}
		if len(back) != len(ps) {
			t.Fatalf("round trip: %d properties, want %d\nin  %q\nout %q", len(back), len(ps), in, out)
		}
		for i := range ps {
			if back[i].Key != ps[i].Key || back[i].Value != ps[i].Value || back[i].Line != i+1 {
				t.Fatalf("round trip %d: %v, want %v at line %d\nout %q", i, back[i], ps[i], i+1, out)
			}
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
