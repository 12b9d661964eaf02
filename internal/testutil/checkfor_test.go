package testutil

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeTB records a Fatalf instead of ending the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = format
	if len(args) > 0 {
		f.failed = args[len(args)-1].(error).Error()
	}
}

func TestCheckFor(t *testing.T) {
	t.Parallel()
	t.Run("holds later", func(t *testing.T) {
		t.Parallel()
		n := 0
		CheckFor(t, Timeout, func() error {
			if n++; n < 3 {
				return errors.New("not yet")
			}
			return nil
		})
		if n != 3 {
			t.Fatalf("cond called %d times, want 3", n)
		}
	})
	t.Run("never holds", func(t *testing.T) {
		t.Parallel()
		f := &fakeTB{TB: t}
		n := 0
		CheckFor(f, 30*time.Millisecond, func() error {
			n++
			if f.failed != "" {
				return nil // Fatalf returned: end the loop
			}
			return errors.New("last seen: 7")
		})
		if !strings.Contains(f.failed, "last seen: 7") {
			t.Fatalf("failure %q does not report the last error", f.failed)
		}
	})
	t.Run("named", func(t *testing.T) {
		t.Parallel()
		if err := Named("log end", func() error { return errors.New("3, want 5") })(); err == nil || err.Error() != "log end: 3, want 5" {
			t.Fatalf("named: %v", err)
		}
		if err := Named("log end", func() error { return nil })(); err != nil {
			t.Fatalf("named, holding: %v", err)
		}
	})
	t.Run("left", func(t *testing.T) {
		t.Parallel()
		if d := Left(context.Background()); d != Timeout {
			t.Fatalf("no deadline: %v, want Timeout", d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if d := Left(ctx); d <= 59*time.Minute || d > time.Hour {
			t.Fatalf("an hour's deadline: %v left", d)
		}
	})
	t.Run("true", func(t *testing.T) {
		t.Parallel()
		ok := false
		cond := True("flag set", func() bool { return ok })
		if err := cond(); err == nil || err.Error() != "flag set" {
			t.Fatalf("false: %v, want the what", err)
		}
		ok = true
		if err := cond(); err != nil {
			t.Fatalf("true: %v", err)
		}
	})
}
