// Package nodetest is the harness of the tests that run a kmirror node
// against a kfake source: the node's broker config on a loopback port in
// a temp dir, the broker itself and kgo clients, each closed when the test
// ends (the kfake source itself is kfaketest's).
//
// It imports the broker, so the in-package tests of the broker and of
// what the broker imports (storage, state, group, netio, batch, txn,
// internal/codec, ...) cannot use it: that would be an import cycle. They
// keep their own small setup. It does not import control, so that the
// control package's own tests (which need its unexported fields) can use
// it too; wiring a controller onto the broker (control.New, then
// SetMirrorAdmin) stays with the tests that have one: control's testNode
// and tests' ctlNode. testutil.CheckFor, which every package needs, sits
// in the parent package, which imports the standard library only.
package nodetest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/broker"
)

// Config is a broker config for a test node: the defaults, one PLAINTEXT
// listener on 127.0.0.1 port 0 (never a fixed port), its log directory in
// a fresh temp dir and no metrics listener. Callers change what their
// test needs before starting the broker.
func Config(t testing.TB) broker.Config {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.Listeners = []broker.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
	cfg.LogDirs = []string{t.TempDir()}
	cfg.MetricsListener = ""
	return cfg
}

// Start starts a broker on cfg, closed when the test ends; an error
// closing it fails the test. Config's temp dir is removed after the
// close: cleanups run last registered first.
func Start(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatalf("starting the broker: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("closing the broker: %v", err)
		}
	})
	return b
}

// Client is a kgo client seeded with addrs, closed when the test ends.
func Client(t testing.TB, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatalf("creating kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// ClientLogs sends a kgo client's records at info and above to logs, so
// that a test whose failure depends on what the client saw (a heartbeat's
// error, a rejoin) prints it beside the nodes' logs (testutil.LogOnFailure).
func ClientLogs(logs *slog.Logger) kgo.Opt {
	return kgo.WithLogger(slogKgo{logs.With("client", "kgo")})
}

type slogKgo struct{ l *slog.Logger }

func (s slogKgo) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (s slogKgo) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelInfo
	switch level {
	case kgo.LogLevelError:
		lv = slog.LevelError
	case kgo.LogLevelWarn:
		lv = slog.LevelWarn
	case kgo.LogLevelDebug:
		lv = slog.LevelDebug
	}
	s.l.Log(context.Background(), lv, msg, keyvals...)
}
