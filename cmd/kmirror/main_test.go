package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		code      int
		stdout    string
		stderrHas string
	}{
		{"no args", nil, 2, "", "Usage:"},
		{"help", []string{"--help"}, 0, "Commands:", ""},
		{"help word", []string{"help"}, 0, "version", ""},
		{"version", []string{"version"}, 0, "kmirror dev (go", ""},
		{"version help", []string{"version", "--help"}, 0, "", "Usage: kmirror version"},
		{"version extra", []string{"version", "x"}, 2, "", "unexpected argument"},
		{"unknown", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"storage", []string{"storage"}, 2, "", "Usage: kmirror storage <info|rebuild|format>"},
		{"storage unknown", []string{"storage", "compact"}, 2, "", `unknown command "compact"`},
		{"storage extra", []string{"storage", "info", "x"}, 2, "", "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			if code := run(tt.args, &out, &errOut); code != tt.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.code, errOut.String())
			}
			if !strings.Contains(out.String(), tt.stdout) {
				t.Errorf("stdout %q lacks %q", out.String(), tt.stdout)
			}
			if !strings.Contains(errOut.String(), tt.stderrHas) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tt.stderrHas)
			}
		})
	}
}
