package realkafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
	// StartTimeout bounds formatting and the wait for the first answer
	// (90 s: a cold JVM on a loaded 2-core machine is slow).
	StartTimeout time.Duration
}

// Broker is a running single-node Kafka cluster.
type Broker struct {
	cfg        Config
	libs       string
	port, ctrl int
	cmd        *exec.Cmd
	exited     chan struct{}
}

// Start installs (if needed), formats and starts a broker, and returns once
// it answers Metadata.
func Start(cfg Config) (*Broker, error) {
	if cfg.Version == "" {
		cfg.Version = Newest
	}
	if cfg.HeapMB == 0 {
		cfg.HeapMB = 512
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 90 * time.Second
	}
	if _, err := exec.LookPath("java"); err != nil {
		return nil, errors.New("realkafka: java is needed to run Apache Kafka")
	}
	libs, err := Install(cfg.Version)
	if err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "realkafka-"); err != nil {
			return nil, fmt.Errorf("realkafka: %w", err)
		}
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, libs: libs, port: ports[0], ctrl: ports[1]}
	if err := b.format(); err != nil {
		return nil, err
	}
	if err := b.start(); err != nil {
		return nil, err
	}
	return b, nil
}

// Addr is the broker's PLAINTEXT listener.
func (b *Broker) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// Version is the broker's Kafka version.
func (b *Broker) Version() string { return b.cfg.Version }

// Libs is the directory of the version's jars (for Tool and JVM clients).
func (b *Broker) Libs() string { return b.libs }

// Dir is the broker's directory: data/ and broker.log.
func (b *Broker) Dir() string { return b.cfg.Dir }

// PID is the broker JVM's process id (for CPU and memory readings).
func (b *Broker) PID() int { return b.cmd.Process.Pid }

func (b *Broker) propsFile() string { return filepath.Join(b.cfg.Dir, "server.properties") }

func (b *Broker) writeProps() error {
	props := map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          "1",
		"controller.quorum.voters":                         "1@127.0.0.1:" + strconv.Itoa(b.ctrl),
		"listeners":                                        "PLAINTEXT://127.0.0.1:" + strconv.Itoa(b.port) + ",CONTROLLER://127.0.0.1:" + strconv.Itoa(b.ctrl),
		"advertised.listeners":                             "PLAINTEXT://127.0.0.1:" + strconv.Itoa(b.port),
		"controller.listener.names":                        "CONTROLLER",
		"listener.security.protocol.map":                   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                                         filepath.Join(b.cfg.Dir, "data"),
		"offsets.topic.replication.factor":                 "1",
		"offsets.topic.num.partitions":                     "4",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"transaction.state.log.num.partitions":             "4",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
		"num.partitions":                                   "1",
	}
	maps.Copy(props, b.cfg.Props)
	var buf bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&buf, "%s=%s\n", k, props[k])
	}
	return os.WriteFile(b.propsFile(), buf.Bytes(), 0o644)
}

// format writes the properties and formats the metadata log with a random
// cluster id, as kafka-storage.sh format does.
func (b *Broker) format() error {
	if err := b.writeProps(); err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	main, err := Main(b.libs, "kafka-storage")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.StartTimeout)
	defer cancel()
	out, err := b.java(ctx, main, "format", "-t", randomClusterID(), "-c", b.propsFile()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("realkafka: formatting Kafka %s: %v\n%s", b.cfg.Version, err, tail(string(out), 2000))
	}
	return nil
}

// randomClusterID is a Kafka cluster id: 16 random bytes, base64 URL
// encoding without padding (what kafka-storage.sh random-uuid prints).
// Like Kafka's Uuid.randomUuid, it never starts with '-': the format
// command would read such an id as an option.
func randomClusterID() string {
	for {
		var id [16]byte
		rand.Read(id[:])
		if s := base64.RawURLEncoding.EncodeToString(id[:]); s[0] != '-' {
			return s
		}
	}
}

// java is the command running a main class on the version's classpath.
func (b *Broker) java(ctx context.Context, main string, args ...string) *exec.Cmd {
	return javaCmd(ctx, b.libs, b.cfg.HeapMB, main, args...)
}

func javaCmd(ctx context.Context, libs string, heapMB int, main string, args ...string) *exec.Cmd {
	jargs := []string{fmt.Sprintf("-Xmx%dm", heapMB), "-XX:+UseG1GC", "-Djava.awt.headless=true",
		"-cp", filepath.Join(libs, "*"), main}
	cmd := exec.CommandContext(ctx, "java", append(jargs, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// start runs the broker and waits for its first Metadata answer.
func (b *Broker) start() error {
	logFile, err := os.OpenFile(filepath.Join(b.cfg.Dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	b.cmd = b.java(context.Background(), "kafka.Kafka", b.propsFile())
	b.cmd.Stdout, b.cmd.Stderr = logFile, logFile
	if err := b.cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("realkafka: starting Kafka %s: %w", b.cfg.Version, err)
	}
	b.exited = make(chan struct{})
	go func() {
		b.cmd.Wait()
		logFile.Close()
		close(b.exited)
	}()
	if err := b.waitReady(); err != nil {
		b.kill()
		return err
	}
	return nil
}

// waitReady polls Metadata until the broker lists itself.
func (b *Broker) waitReady() error {
	deadline := time.Now().Add(b.cfg.StartTimeout)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequestRetries(0))
	if err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		select {
		case <-b.exited:
			return fmt.Errorf("realkafka: Kafka %s exited at start:\n%s", b.cfg.Version, b.logTail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		meta, err := adm.BrokerMetadata(ctx)
		cancel()
		if err == nil && len(meta.Brokers) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("realkafka: Kafka %s did not answer within %v (last: %v):\n%s",
				b.cfg.Version, b.cfg.StartTimeout, err, b.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (b *Broker) logTail() string {
	data, _ := os.ReadFile(filepath.Join(b.cfg.Dir, "broker.log"))
	return tail(string(data), 3000)
}

// Stop ends the broker cleanly (SIGTERM, as kafka-server-stop.sh), killing
// it if it has not exited within 60 s. Its directory is kept.
func (b *Broker) Stop() error {
	if b.cmd == nil {
		return nil
	}
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(60 * time.Second):
		b.kill()
		return fmt.Errorf("realkafka: Kafka %s ignored SIGTERM for 60 s; killed", b.cfg.Version)
	}
	b.cmd = nil
	return nil
}

func (b *Broker) kill() {
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	<-b.exited
	b.cmd = nil
}

// Restart stops the broker and starts it again on the same directory and
// ports: partition leader epochs move on, as after any broker restart.
func (b *Broker) Restart() error {
	if err := b.Stop(); err != nil {
		return err
	}
	return b.start()
}

// Close stops the broker and removes its directory.
func (b *Broker) Close() error {
	err := b.Stop()
	if rmErr := os.RemoveAll(b.cfg.Dir); err == nil {
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
	cmd := javaCmd(ctx, libs, 512, main, args...)
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
