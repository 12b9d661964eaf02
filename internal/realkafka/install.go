// Package realkafka runs Apache Kafka itself, the JVM broker and its
// tools, for kmirror's tests and benchmarks: kmirror's users run Kafka,
// and kfake alone cannot show that a real Kafka source mirrors right or
// that Kafka's own tools work against kmirror.
//
// Kafka's jars come from Maven Central (Maven resolves them with their
// dependencies) into a cache directory, one per version; Start formats a
// single-node KRaft broker (broker and controller in one process) in a
// temporary directory on free loopback ports, waits until it answers, and
// Stop ends it. StartCluster does the same for a multi-node KRaft cluster
// (every node broker and controller), whose nodes a test can kill -9,
// stop and restart one by one to play a source broker's failure. Tool runs one of Kafka's command line tools by its main
// class, as the bin/*.sh scripts do. Nothing here skips: a harness that
// cannot install or start Kafka is an error the caller reports.
package realkafka

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The Kafka versions the tests use: Newest is the newest 4.x whose broker
// and tools resolve from Maven Central (connect-mirror 4.4.0 is not
// served, so MirrorMaker 2 comes from Previous); Previous is the 3.9 line.
const (
	Newest   = "4.4.0"
	Previous = "3.9.2"
)

// Versions lists the versions .ci/run installs.
var Versions = []string{Newest, Previous}

// withMirrorMaker reports whether a version's connect-mirror resolves.
func withMirrorMaker(version string) bool { return version != "4.4.0" }

// CacheDir is where each version's jars live: $KMIRROR_KAFKA_CACHE, else
// ~/.cache/kmirror/kafka.
func CacheDir() string {
	if d := os.Getenv("KMIRROR_KAFKA_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "kmirror-kafka")
	}
	return filepath.Join(home, ".cache", "kmirror", "kafka")
}

// pom asks Maven for the broker, the tools and (where served) MirrorMaker
// 2, with every dependency.
const pom = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.kmirror</groupId><artifactId>realkafka</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>%[1]s</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>%[1]s</version></dependency>
    %[2]s
  </dependencies>
</project>
`

// Install makes sure version's jars (and its SLF4J binding, see
// installLogging) are in the cache and returns their directory. The first call per version runs Maven (about 20 s and 60 MB);
// later calls find the directory. Concurrent installs of one version (test
// packages run in parallel) wait for each other on a lock file.
func Install(version string) (string, error) {
	mirror := ""
	if withMirrorMaker(version) {
		mirror = `<dependency><groupId>org.apache.kafka</groupId><artifactId>connect-mirror</artifactId><version>` + version + `</version></dependency>`
	}
	libs, err := installJars(version, "libs", ".installed", fmt.Sprintf(pom, version, mirror), true)
	if err != nil {
		return "", err
	}
	if _, err := installLogging(version); err != nil {
		return "", err
	}
	return libs, nil
}

// slf4jBindings are the SLF4J bindings that Kafka's distribution ships in
// libs/ and its Maven poms do not name, by version: without one a broker
// logs nothing at all, and a test that fails on it shows an empty
// broker.log. The 3.x line's kafka_2.13 brings slf4j-reload4j itself. The
// binding's version is the log4j that the Kafka version resolves.
var slf4jBindings = map[string]string{
	"4.4.0": "<dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.25.5</version></dependency>",
}

// installLogging makes sure version's SLF4J binding (slf4jBindings) is in
// the cache and returns its directory, "" for a version that needs none.
// It is a directory of its own beside libs/, so that caches installed
// before it existed stay valid and no running JVM sees libs/ rewritten.
func installLogging(version string) (string, error) {
	dep, ok := slf4jBindings[version]
	if !ok {
		return "", nil
	}
	return installJars(version, "logging", ".installed-logging", bindingPom(dep), false)
}

// bindingPom asks Maven for one dependency, without the dependencies it
// brings (libs/ has them).
func bindingPom(dep string) string {
	return `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.kmirror</groupId><artifactId>realkafka-logging</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>` + dep + `</dependencies>
</project>
`
}

// installJars fetches the jars pomXML names (and, if transitive, the jars
// they need) into version's sub directory of the cache, unless marker
// says it was done; it returns the directory.
func installJars(version, sub, marker, pomXML string, transitive bool) (string, error) {
	dir := filepath.Join(CacheDir(), version)
	jars := filepath.Join(dir, sub)
	done := filepath.Join(dir, marker)
	if _, err := os.Stat(done); err == nil {
		return jars, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("realkafka: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("realkafka: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("realkafka: locking %s: %w", dir, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(done); err == nil {
		return jars, nil // installed while we waited
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", errors.New("realkafka: Maven (mvn) is needed to fetch Apache Kafka's jars; .ci/run installs it")
	}
	pomFile := filepath.Join(dir, sub+".pom.xml")
	if err := os.WriteFile(pomFile, []byte(pomXML), 0o644); err != nil {
		return "", fmt.Errorf("realkafka: %w", err)
	}
	os.RemoveAll(jars)
	cmd := exec.Command("mvn", "-q", "-B", "-f", pomFile, "dependency:copy-dependencies", "-DexcludeTransitive="+strconv.FormatBool(!transitive), "-DoutputDirectory="+jars)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("realkafka: fetching Kafka %s %s with Maven: %v\n%s", version, sub, err, tail(out.String(), 2000))
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		return "", fmt.Errorf("realkafka: %w", err)
	}
	return jars, nil
}

// Main finds a tool's main class in version's jars: the tools moved from
// the Scala core (kafka.*) to Java (org.apache.kafka.tools.*) across the
// 3.x and 4.x lines. Tools are named as their bin/ scripts.
func Main(libs, tool string) (string, error) {
	candidates, ok := toolClasses[tool]
	if !ok {
		return "", fmt.Errorf("realkafka: unknown tool %q", tool)
	}
	classes, err := jarClasses(libs)
	if err != nil {
		return "", err
	}
	for _, c := range candidates {
		if classes[c] {
			return c, nil
		}
	}
	return "", fmt.Errorf("realkafka: no main class of %s in %s (looked for %s)", tool, libs, strings.Join(candidates, ", "))
}

var toolClasses = map[string][]string{
	"kafka-storage":                {"kafka.tools.StorageTool"},
	"kafka-topics":                 {"org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"},
	"kafka-configs":                {"org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"},
	"kafka-acls":                   {"org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"},
	"kafka-console-producer":       {"org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer"},
	"kafka-console-consumer":       {"org.apache.kafka.tools.consumer.ConsoleConsumer", "kafka.tools.ConsoleConsumer"},
	"kafka-consumer-groups":        {"org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "kafka.admin.ConsumerGroupCommand"},
	"kafka-share-groups":           {"org.apache.kafka.tools.consumer.group.ShareGroupCommand"},
	"kafka-console-share-consumer": {"org.apache.kafka.tools.consumer.ConsoleShareConsumer"},
	"kafka-producer-perf-test":     {"org.apache.kafka.tools.ProducerPerformance"},
	"kafka-verifiable-producer":    {"org.apache.kafka.tools.VerifiableProducer"},
	"kafka-consumer-perf-test":     {"org.apache.kafka.tools.ConsumerPerformance", "kafka.tools.ConsumerPerformance"},
	"kafka-metadata-quorum":        {"org.apache.kafka.tools.MetadataQuorumCommand"},
	"kafka-leader-election":        {"org.apache.kafka.tools.LeaderElectionCommand", "kafka.admin.LeaderElectionCommand"},
	"connect-mirror-maker":         {"org.apache.kafka.connect.mirror.MirrorMaker"},
}

// jarClasses lists the classes of every jar in libs.
func jarClasses(libs string) (map[string]bool, error) {
	jars, err := filepath.Glob(filepath.Join(libs, "*.jar"))
	if err != nil || len(jars) == 0 {
		return nil, fmt.Errorf("realkafka: no jars in %s", libs)
	}
	out := map[string]bool{}
	for _, j := range jars {
		if !strings.Contains(filepath.Base(j), "kafka") && !strings.Contains(filepath.Base(j), "connect") {
			continue
		}
		zr, err := zip.OpenReader(j)
		if err != nil {
			return nil, fmt.Errorf("realkafka: reading %s: %w", j, err)
		}
		for _, f := range zr.File {
			if name, ok := strings.CutSuffix(f.Name, ".class"); ok {
				out[strings.ReplaceAll(name, "/", ".")] = true
			}
		}
		zr.Close()
	}
	return out, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
