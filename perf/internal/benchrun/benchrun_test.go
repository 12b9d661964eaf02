package benchrun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The address of the serving line is sent once; later lines are drained.
func TestServingAddr(t *testing.T) {
	t.Parallel()
	out := strings.NewReader("starting\nkmirror serving on 127.0.0.1:9092 (cluster id x)\nkmirror serving on 127.0.0.1:1\nmore\n")
	select {
	case a := <-ServingAddr(out):
		if a != "127.0.0.1:9092" {
			t.Fatalf("address %q", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no address")
	}
	if Tail("abcdef", 2) != "ef" || Tail("ab", 5) != "ab" {
		t.Fatal("Tail")
	}
}

type testReport struct{ errs []string }

func (r *testReport) Fail(msg string)   { r.errs = append(r.errs, msg) }
func (r *testReport) Write(w io.Writer) { io.WriteString(w, "report "+strings.Join(r.errs, ";")+"\n") }

// A failed benchmark's report holds its error and the progress log goes
// into the out file; the status is 1, 0 for a run that succeeded.
func TestRun(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out.txt")
	var stdout, stderr bytes.Buffer
	code := Run("x", out, &stdout, &stderr, &testReport{}, func(_ context.Context, log *slog.Logger) error {
		log.Info("halfway")
		return errors.New("boom")
	})
	data, _ := os.ReadFile(out)
	if code != 1 || stdout.String() != "report boom\n" || !strings.Contains(string(data), "report boom") ||
		!strings.Contains(string(data), "# progress log") || !strings.Contains(string(data), "halfway") {
		t.Fatalf("status %d, stdout %q, file %q", code, stdout.String(), data)
	}
	if code := Run("x", "", io.Discard, io.Discard, &testReport{}, func(context.Context, *slog.Logger) error { return nil }); code != 0 {
		t.Fatalf("status %d for a run that succeeded", code)
	}
}
