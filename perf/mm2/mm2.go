package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/internal/realkafka"
)

// Source and target cluster aliases of the MirrorMaker 2 flow; MM2's
// default replication policy names the copy "src.<topic>".
const (
	mm2Source = "src"
	mm2Target = "dst"
)

// mm2Config is what the benchmark's mm2.properties says.
type mm2Config struct {
	SourceBootstrap string
	TargetBootstrap string
	Topic           string
	TasksMax        int
}

// prop is one line of a properties file, with an optional comment above.
type prop struct {
	comment    string
	key, value string
}

// properties lists mm2.properties in the order written. Three groups:
// the one flow; internal topics at replication factor 1 (one broker a
// side); and everything beyond the data copy switched off or made as rare
// as MM2 allows, so that MM2 is measured copying records. The clients are
// tuned as Strimzi's "MirrorMaker 2 for high-volume messages" recipe, plus
// lz4 on the producer so the copy is stored compressed like the source;
// Connect's own producer defaults (acks=all, one request in flight) stay.
func (c mm2Config) properties() []prop {
	src, dst := mm2Source, mm2Target
	flow := src + "->" + dst
	return []prop{
		{"The one flow: " + flow + ", one topic.", "clusters", src + ", " + dst},
		{"", src + ".bootstrap.servers", c.SourceBootstrap},
		{"", dst + ".bootstrap.servers", c.TargetBootstrap},
		{"", flow + ".enabled", "true"},
		{"", dst + "->" + src + ".enabled", "false"},
		{"", flow + ".topics", c.Topic},
		{"", "tasks.max", strconv.Itoa(c.TasksMax)},

		{"One broker per cluster: every internal topic at replication factor 1.", "replication.factor", "1"},
		{"", "checkpoints.topic.replication.factor", "1"},
		{"", "heartbeats.topic.replication.factor", "1"},
		{"", "config.storage.replication.factor", "1"},
		{"", "offset.storage.replication.factor", "1"},
		{"", "status.storage.replication.factor", "1"},

		{"Only the data copy: no offset syncs, checkpoints, heartbeats, group,\n" +
			"config or ACL sync; the topic exists at start, so no rescans. (No\n" +
			"offset-syncs.* setting may appear with offset syncs off: MM2 refuses\n" +
			"the source connector. The checkpoint connector is refused anyway, as\n" +
			"it should be: MM2 logs two ERRORs for it and runs without it.)", "emit.offset-syncs.enabled", "false"},
		{"", "emit.checkpoints.enabled", "false"},
		{"", "emit.heartbeats.enabled", "false"},
		{"", "sync.group.offsets.enabled", "false"},
		{"", "refresh.groups.enabled", "false"},
		{"", "sync.topic.configs.enabled", "false"},
		{"", "sync.topic.acls.enabled", "false"},
		{"", "refresh.topics.interval.seconds", "3600"},

		{"Clients tuned for throughput (Strimzi's high-volume recipe), lz4 like the source.",
			src + ".consumer.fetch.max.bytes", "52428800"},
		{"", src + ".consumer.max.partition.fetch.bytes", "1048576"},
		{"", src + ".consumer.max.poll.records", "500"},
		{"", dst + ".producer.compression.type", "lz4"},
		{"", dst + ".producer.batch.size", "327680"},
		{"", dst + ".producer.linger.ms", "100"},
	}
}

// render writes properties as a .properties file.
func render(ps []prop) string {
	var b strings.Builder
	for i, p := range ps {
		if p.comment != "" {
			if i > 0 {
				b.WriteByte('\n')
			}
			for line := range strings.SplitSeq(p.comment, "\n") {
				b.WriteString("# " + line + "\n")
			}
		}
		b.WriteString(p.key + " = " + p.value + "\n")
	}
	return b.String()
}

// mm2TargetTopic is the name MM2's default replication policy gives the
// copy of topic.
func mm2TargetTopic(topic string) string { return mm2Source + "." + topic }

// mm2Log4j sends MM2's log (reload4j in the 3.9 jars) to a file at INFO,
// as connect-log4j.properties does to stdout.
func mm2Log4j(logFile string) string {
	return render([]prop{
		{"MirrorMaker 2's log, INFO, to a file.", "log4j.rootLogger", "INFO, file"},
		{"", "log4j.appender.file", "org.apache.log4j.FileAppender"},
		{"", "log4j.appender.file.File", logFile},
		{"", "log4j.appender.file.layout", "org.apache.log4j.PatternLayout"},
		{"", "log4j.appender.file.layout.ConversionPattern", "[%d] %p %m (%c)%n"},
	})
}

// mm2JVMArgs are bin/connect-mirror-maker.sh's JVM options: its heap
// (-Xms256M and -Xmx2G unless told) and kafka-run-class.sh's
// KAFKA_JVM_PERFORMANCE_OPTS.
func mm2JVMArgs(heapMB int, log4jFile, libs, main, propsFile string) []string {
	return []string{
		"-Xms256M", fmt.Sprintf("-Xmx%dM", heapMB),
		"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		"-Dlog4j.configuration=file:" + log4jFile,
		"-cp", filepath.Join(libs, "*"), main, propsFile,
	}
}

// mm2Proc is a running MirrorMaker 2 (dedicated mode).
type mm2Proc struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logFile string
}

// startMM2 writes mm2.properties and the log config into dir and starts
// org.apache.kafka.connect.mirror.MirrorMaker from the 3.9 jars.
func startMM2(cfg mm2Config, dir string, heapMB int) (*mm2Proc, error) {
	libs, err := realkafka.Install(realkafka.Previous)
	if err != nil {
		return nil, err
	}
	main, err := realkafka.Main(libs, "connect-mirror-maker")
	if err != nil {
		return nil, err
	}
	propsFile := filepath.Join(dir, "mm2.properties")
	log4jFile := filepath.Join(dir, "mm2-log4j.properties")
	p := &mm2Proc{logFile: filepath.Join(dir, "mm2.log"), exited: make(chan struct{})}
	if err := os.WriteFile(propsFile, []byte(render(cfg.properties())), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(log4jFile, []byte(mm2Log4j(p.logFile)), 0o644); err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(dir, "mm2.stdout"))
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command("java", mm2JVMArgs(heapMB, log4jFile, libs, main, propsFile)...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = childAttr()
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting MirrorMaker 2: %w", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		out.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *mm2Proc) pid() int { return p.cmd.Process.Pid }

// err reports an exit before the copy was done, or a source connector MM2
// refused to configure (it then runs on, copying nothing).
func (p *mm2Proc) err() error {
	select {
	case <-p.exited:
		return fmt.Errorf("MirrorMaker 2 exited (%v); log tail:\n%s", p.waitErr, p.logTail(3000))
	default:
	}
	data, _ := os.ReadFile(p.logFile)
	const refused = "Failed to configure MirrorSourceConnector"
	if i := bytes.Index(data, []byte(refused)); i >= 0 {
		return fmt.Errorf("MirrorMaker 2 refused its config:\n%s", tailString(string(data[i:]), 2000, true))
	}
	return nil
}

// tailString cuts s to n bytes, keeping the head or the tail.
func tailString(s string, n int, head bool) string {
	if len(s) <= n {
		return s
	}
	if head {
		return s[:n] + "..."
	}
	return "..." + s[len(s)-n:]
}

// stop ends MM2 as kill(1) would (SIGTERM to its group), then SIGKILL
// after 30 s.
func (p *mm2Proc) stop() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// problems returns MM2's WARN and ERROR log lines (at most max).
func (p *mm2Proc) problems(max int) []string {
	data, _ := os.ReadFile(p.logFile)
	return problemLines(data, []string{"] WARN ", "] ERROR "}, max)
}

func (p *mm2Proc) logTail(n int) string {
	data, _ := os.ReadFile(p.logFile)
	return tailString(string(data), n, false)
}

// problemLines returns the lines of data holding one of marks, at most
// max of them, then a count of the rest.
func problemLines(data []byte, marks []string, max int) []string {
	var out []string
	more := 0
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		for _, m := range marks {
			if bytes.Contains(line, []byte(m)) {
				if len(out) < max {
					out = append(out, string(line))
				} else {
					more++
				}
				break
			}
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("... and %d more", more))
	}
	return out
}
