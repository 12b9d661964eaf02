package clientauth

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// FuzzParseJAAS checks that ParseJAAS never panics and that whatever it
// accepts survives a round trip: rendering the module, the flag "required"
// and every option as key="value" (\ and " escaped) parses back to the same
// module and options.
func FuzzParseJAAS(f *testing.F) {
	for _, seed := range []string{
		plainModule + ` required username="alice" password="alice-secret";`,
		scramModule + ` required username="alice" password="s3cr=t; x y";`,
		scramModule + ` requisite username="al\"ice" password="a\\b\"c\\";`,
		scramModule + ` sufficient username="tokenid" password="hmac" tokenauth=true;`,
		plainModule + ` optional username=alice password=a-b_c.d$e:f@g/h9;`,
		"\n\t " + plainModule + " \r\n REQUIRED\n username = \"alice\"\n password=\t\"p\"  ;\n",
		plainModule + ` required;`,
		plainModule + ` required username="" password="p\xc3\xa4ss";`,
		plainModule + ` required username="alice" password="pw"`,
		plainModule + ` required username="alice" password="pw;`,
		plainModule + ` required username="alice" password="pw\`,
		plainModule + ` required username= ;`,
		plainModule + ` required username="a" username="b";`,
		plainModule + ` required a="1"; ` + scramModule + ` required b="2";`,
		plainModule + ` mandatory username="alice";`,
		plainModule + ` username="alice";`,
		"",
		";",
		`"`,
		`a b c=";`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		module, opts, err := ParseJAAS(s)
		if err != nil {
			if module != "" || opts != nil {
				t.Fatalf("ParseJAAS(%q) failed (%v) but returned module %q, options %q", s, err, module, opts)
			}
			return
		}
		if module == "" || opts == nil {
			t.Fatalf("ParseJAAS(%q) = %q, %q: an empty module or nil options without an error", s, module, opts)
		}
		rendered := renderJAAS(module, opts)
		module2, opts2, err := ParseJAAS(rendered)
		if err != nil {
			t.Fatalf("ParseJAAS(%q) = %q, %q; rendered as %q it fails: %v", s, module, opts, rendered, err)
		}
		if module2 != module || !maps.Equal(opts2, opts) {
			t.Fatalf("round trip of %q: got %q, %q from %q; want %q, %q", s, module2, opts2, rendered, module, opts)
		}
	})
}

// renderJAAS writes module and options back as a sasl.jaas.config value.
func renderJAAS(module string, opts map[string]string) string {
	var b strings.Builder
	b.WriteString(module)
	b.WriteString(" required")
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		b.WriteString(" ")
		b.WriteString(k)
		b.WriteString(`="`)
		for i := 0; i < len(opts[k]); i++ {
			if c := opts[k][i]; c == '\\' || c == '"' {
				b.WriteByte('\\')
			}
			b.WriteByte(opts[k][i])
		}
		b.WriteString(`"`)
	}
	b.WriteString(";")
	return b.String()
}
