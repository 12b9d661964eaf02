package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/internal/realkafka"
	"github.com/kmirror/kmirror/perf/internal/benchrun"
)

// The targets, in the order a cell's first round runs them.
const (
	targetKmirror = "kmirror"
	targetKfake   = "kfake"
	targetKafka   = "kafka"
)

var allTargets = []string{targetKmirror, targetKfake, targetKafka}

// target is a running broker the load is driven against.
type target struct {
	name    string
	version string
	addr    string
	pid     int // 0 when it runs in this process
	close   func() error
}

// startTarget starts name in a subdirectory of work. kmirror and kfake run
// as children of bin (kmirror serve, kmirror bench --kfake-source), Kafka
// through internal/realkafka, so that every target's CPU is its process's.
func startTarget(ctx context.Context, name, bin, work string, heapMB int, log *slog.Logger) (*target, error) {
	dir := filepath.Join(work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	switch name {
	case targetKmirror:
		return startChild(ctx, name, bin, dir, "serve", "--log-level", "warn",
			"--override", "listeners=PLAINTEXT://127.0.0.1:0",
			"--override", "log.dirs="+filepath.Join(dir, "data"),
			"--override", "metrics.listener=")
	case targetKfake:
		return startChild(ctx, name, bin, dir, "bench", "--kfake-source")
	case targetKafka:
		return startKafka(dir, heapMB, log)
	}
	return nil, fmt.Errorf("unknown target %q", name)
}

// startChild runs bin args with its stderr in dir/<name>.log and waits
// for the line "... serving on ADDR" that kmirror serve and the kfake
// source print once they listen. The kfake source exits when its stdin
// closes, kmirror serve on SIGTERM; stop does both.
func startChild(ctx context.Context, name, bin, dir string, args ...string) (*target, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s (%s %s): %w", name, bin, args[0], err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); logf.Close(); close(exited) }()
	stop := func() error {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		var ee *exec.ExitError
		if waitErr != nil && !errors.As(waitErr, &ee) {
			return waitErr
		}
		return nil
	}
	addr := benchrun.ServingAddr(stdout)
	select {
	case a := <-addr:
		return &target{name: name, addr: a, pid: cmd.Process.Pid, close: stop}, nil
	case <-exited:
		data, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%s exited before serving (%v):\n%s", name, waitErr, benchrun.Tail(string(data), 3000))
	case <-time.After(60 * time.Second):
		stop()
		return nil, fmt.Errorf("%s did not start within 60 s", name)
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}

// startKafka starts a single-node KRaft Kafka (realkafka.Newest). It tries
// three times: realkafka's random cluster id is base64url, and one in 64
// starts with '-', which kafka-storage format reads as an option.
func startKafka(dir string, heapMB int, log *slog.Logger) (*target, error) {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		d := filepath.Join(dir, fmt.Sprintf("attempt-%d", attempt))
		var b *realkafka.Broker
		b, err = realkafka.Start(realkafka.Config{Version: realkafka.Newest, HeapMB: heapMB, Dir: d})
		if err == nil {
			return &target{name: targetKafka, version: b.Version(), addr: b.Addr(), pid: b.PID(), close: b.Close}, nil
		}
		log.Warn("starting Kafka failed", "attempt", attempt, "err", err)
		os.RemoveAll(d)
	}
	return nil, fmt.Errorf("starting Kafka: %w", err)
}
