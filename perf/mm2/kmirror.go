package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/perf/internal/benchrun"
)

// mirrorName is the cluster mirror the benchmark creates on kmirror.
const mirrorName = "bench"

// buildKmirror builds cmd/kmirror into dir with the go command that runs
// this program.
func buildKmirror(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "kmirror")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/kmirror/kmirror/cmd/kmirror")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/kmirror: %v\n%s", err, out)
	}
	return bin, nil
}

// kmirrorProc is a `kmirror serve` child: the node that mirrors, stores
// and serves the copy, with its control plane, as deployed.
type kmirrorProc struct {
	cmd     *exec.Cmd
	addr    string
	dir     string
	logFile string
	exited  chan struct{}
	waitErr error
	cl      *kgo.Client
}

// startKmirror runs `kmirror serve` on a free loopback port with its data
// in dir/data and waits until it prints that it serves.
func startKmirror(ctx context.Context, bin, dir string) (*kmirrorProc, error) {
	p := &kmirrorProc{dir: dir, logFile: filepath.Join(dir, "kmirror.log"), exited: make(chan struct{})}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(p.logFile)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, "serve", "--log-level", "info",
		"--override", "listeners=PLAINTEXT://127.0.0.1:0",
		"--override", "log.dirs="+filepath.Join(dir, "data"),
		"--override", "metrics.listener=",
		"--override", "group.initial.rebalance.delay.ms=0")
	p.cmd.Stderr = logf
	p.cmd.SysProcAttr = childAttr()
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting kmirror serve: %w", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	addr := benchrun.ServingAddr(stdout)
	select {
	case p.addr = <-addr:
	case <-p.exited:
		return nil, fmt.Errorf("kmirror serve exited at start (%v):\n%s", p.waitErr, p.logTail(3000))
	case <-time.After(60 * time.Second):
		p.stop()
		return nil, errors.New("kmirror serve did not start within 60 s")
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
	p.cl, err = kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.ClientID("mm2-bench"),
		kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)))
	if err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

func (p *kmirrorProc) pid() int { return p.cmd.Process.Pid }

// mirror creates the cluster mirror from source and starts topic on it,
// as `kmirror mirrors --create` and `--start` do; every mirror setting is
// the default.
func (p *kmirrorProc) mirror(ctx context.Context, source, topic string) error {
	create := mirrorapi.NewPtrCreateClusterMirrorRequest()
	create.MirrorName = mirrorName
	create.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: &source}}
	cresp, err := create.RequestWith(ctx, p.cl)
	if err != nil {
		return fmt.Errorf("CreateClusterMirror: %w", err)
	}
	if cresp.ErrorCode != 0 {
		return fmt.Errorf("CreateClusterMirror: %s", describeErr(cresp.ErrorCode, cresp.ErrorMessage))
	}
	start := mirrorapi.NewPtrStartMirrorTopicsRequest()
	start.MirrorName = mirrorName
	start.Topics = []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: topic}}
	sresp, err := start.RequestWith(ctx, p.cl)
	if err != nil {
		return fmt.Errorf("StartMirrorTopics: %w", err)
	}
	if sresp.ErrorCode != 0 {
		return fmt.Errorf("StartMirrorTopics: %s", describeErr(sresp.ErrorCode, sresp.ErrorMessage))
	}
	for _, t := range sresp.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("StartMirrorTopics %s: %s", t.Name, describeErr(t.ErrorCode, t.ErrorMessage))
		}
	}
	return nil
}

func describeErr(code int16, msg *string) string {
	s := mirrorapi.ErrorName(code)
	if msg != nil && *msg != "" {
		s += ": " + *msg
	}
	return s
}

// unhealthy describes the mirror's partitions that are neither MIRRORING
// nor on their way to it (LOG_ALIGNMENT, EPOCH_FENCING at the start), or
// that carry an error message, sorted; empty when all are well.
func (p *kmirrorProc) unhealthy(ctx context.Context) ([]string, error) {
	req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{mirrorName}
	resp, err := req.RequestWith(ctx, p.cl)
	if err != nil {
		return nil, fmt.Errorf("DescribeClusterMirrors: %w", err)
	}
	var out []string
	for _, m := range resp.Mirrors {
		if m.ErrorCode != 0 {
			out = append(out, "mirror "+m.MirrorName+": "+describeErr(m.ErrorCode, m.ErrorMessage))
		}
		for _, t := range m.Topics {
			for _, part := range t.Partitions {
				switch part.StateValue {
				case "MIRRORING", "LOG_ALIGNMENT", "EPOCH_FENCING":
					if part.ErrorMessage == nil || *part.ErrorMessage == "" {
						continue
					}
				}
				s := fmt.Sprintf("%s-%d %s", t.TopicName, part.PartitionIndex, part.StateValue)
				if part.ErrorMessage != nil {
					s += ": " + *part.ErrorMessage
				}
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// err reports an exit before the copy was done.
func (p *kmirrorProc) err() error {
	select {
	case <-p.exited:
		return fmt.Errorf("kmirror serve exited (%v):\n%s", p.waitErr, p.logTail(3000))
	default:
		return nil
	}
}

// problems returns kmirror's WARN and ERROR log lines (at most max).
func (p *kmirrorProc) problems(max int) []string {
	data, _ := os.ReadFile(p.logFile)
	return problemLines(data, []string{"level=WARN", "level=ERROR"}, max)
}

func (p *kmirrorProc) logTail(n int) string {
	data, _ := os.ReadFile(p.logFile)
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// stop ends the node cleanly (SIGTERM), SIGKILL after 30 s.
func (p *kmirrorProc) stop() {
	if p.cl != nil {
		p.cl.Close()
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}
