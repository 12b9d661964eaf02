package realkafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Config describes a broker to start. Zero values are the defaults named.
type Config struct {
	// Version is the Kafka version (Newest).
	Version string
	// Dir holds the broker's data and log (a new temporary directory).
	Dir string
	// Props are extra server.properties entries; they win over the
	// harness's own (a test's log.cleaner.backoff.ms, say).
	Props map[string]string
	// HeapMB is the JVM heap (512).
	HeapMB int
	// JVM, when not nil, replaces the harness's JVM options besides the
	// heap: G1 for a Broker, and for a Cluster the first JIT tier only
	// with the serial collector (clusterJVM). A benchmark of a Cluster
	// passes Kafka's own (KafkaRunClassJVM).
	JVM []string
	// StartTimeout bounds formatting and the wait for the first answer
	// (90 s: a cold JVM on a loaded 2-core machine is slow).
	StartTimeout time.Duration
}

// Broker is a running single-node Kafka cluster. Its Node's methods
// (Addr, Dir, PID, Stop, Kill, Restart) act on that one node.
type Broker struct {
	*Node
}

// prepare fills in cfg's zero fields (heapMB is the default heap), checks
// for java and installs the version; it returns the jars' directory.
func (cfg Config) prepare(heapMB int) (Config, string, error) {
	if cfg.Version == "" {
		cfg.Version = Newest
	}
	if cfg.HeapMB == 0 {
		cfg.HeapMB = heapMB
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 90 * time.Second
	}
	if _, err := exec.LookPath("java"); err != nil {
		return cfg, "", errors.New("realkafka: java is needed to run Apache Kafka")
	}
	libs, err := Install(cfg.Version)
	if err != nil {
		return cfg, "", err
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "realkafka-"); err != nil {
			return cfg, "", fmt.Errorf("realkafka: %w", err)
		}
	}
	return cfg, libs, nil
}

// jvm is cfg.JVM, or def when that is nil.
func (cfg Config) jvm(def []string) []string {
	if cfg.JVM != nil {
		return cfg.JVM
	}
	return def
}

// Start installs (if needed), formats and starts a broker, and returns once
// it answers Metadata.
func Start(cfg Config) (*Broker, error) {
	cfg, libs, err := cfg.prepare(512)
	if err != nil {
		return nil, err
	}
	nodes, err := newNodes(cfg, libs, layout{count: 1, dirOf: func(int32) string { return cfg.Dir }, jvm: cfg.jvm(kafkaJVM)})
	if err != nil {
		return nil, err
	}
	if err := startNodes(nodes); err != nil {
		return nil, err
	}
	return &Broker{nodes[0]}, nil
}

// Version is the broker's Kafka version.
func (b *Broker) Version() string { return b.version }

// Libs is the directory of the version's jars (for Tool and JVM clients).
func (b *Broker) Libs() string { return b.libs }

// Close stops the broker and removes its directory.
func (b *Broker) Close() error {
	err := b.Stop()
	if rmErr := os.RemoveAll(b.dir); err == nil {
		err = rmErr
	}
	return err
}

// Tool runs one of Kafka's command line tools (named as its bin/ script,
// without .sh) with this broker's jars and returns its combined output.
func (b *Broker) Tool(ctx context.Context, tool string, args ...string) (string, error) {
	return Tool(ctx, b.libs, tool, args...)
}

// Tool runs a Kafka tool from the jars in libs (see Install); stdin is
// empty. The error includes the output's tail.
func Tool(ctx context.Context, libs, tool string, args ...string) (string, error) {
	return ToolWithInput(ctx, libs, "", tool, args...)
}

// ToolWithInput is Tool with stdin (kafka-console-producer's records).
func ToolWithInput(ctx context.Context, libs, stdin, tool string, args ...string) (string, error) {
	main, err := Main(libs, tool)
	if err != nil {
		return "", err
	}
	cmd := javaCmd(ctx, []string{libs}, 512, kafkaJVM, main, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("realkafka: %s %s: %v\n%s", tool, strings.Join(args, " "), err, tail(string(out), 3000))
	}
	return string(out), nil
}

// freePorts picks n free loopback ports. They are released before use, so
// another process could take one in between; on a test machine that race
// is rare, and a broker that cannot bind fails its start loudly.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("realkafka: picking a port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
