package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/topicid"
	"github.com/kmirror/kmirror/state"
)

// storageCLI runs `kmirror storage` in-process.
func storageCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut strings.Builder
	code = run(append([]string{"storage"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// The issue 17 story: a node with topics and records in two log dirs is
// stopped and its state store deleted. serve refuses, pointing at the
// rebuild; `storage rebuild` registers the topics again with their ids and
// partition counts and restores the cluster id; serve starts, and a
// consumer reads every record. A rebuild while the node runs is refused.
func TestStorageRebuildAfterTheStateStoreIsLost(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dirA, dirB := t.TempDir(), t.TempDir()
	logDirs := dirA + "," + dirB
	args := []string{"--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "log.dirs=" + logDirs,
		"--override", "metrics.listener=", "--log-level", "warn"}
	node, addr := startServe(t, args...)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	topics := map[string]int32{"ledger": 3, "audit": 1}
	for name, n := range topics {
		if _, err := adm.CreateTopic(ctx, n, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{}
	var recs []*kgo.Record
	for name, n := range topics {
		for p := range n {
			for i := range 40 {
				v := fmt.Sprintf("%s-%d-%d", name, p, i)
				want[v] = true
				recs = append(recs, &kgo.Record{Topic: name, Partition: p, Value: []byte(v)})
			}
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clusterID := meta.Cluster
	// A group's offset, in __consumer_offsets: the rebuild registers the
	// topic again as the internal topic it is.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "ledger", Partition: 1, At: 17, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "readers", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	pid, _, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()

	// While the node runs, the store is locked.
	if code, _, stderr := storageCLI("rebuild", "--log-dirs", logDirs); code != 1 || !strings.Contains(stderr, "stop the node first") {
		t.Fatalf("rebuild while the node runs: exit %d, stderr:\n%s", code, stderr)
	}
	if code, info, _ := storageCLI("info", "--log-dirs", logDirs); code != 0 || !strings.Contains(info, "in use by a running node") ||
		!strings.Contains(info, "ledger-2") {
		t.Fatalf("info while the node runs: exit %d\n%s", code, info)
	}
	if err := node.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := node.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
	for name, n := range topics {
		for p := range n {
			dir := filepath.Join(dirA, fmt.Sprintf("%s-%d", name, p))
			if _, err := os.Stat(dir); err != nil {
				dir = filepath.Join(dirB, fmt.Sprintf("%s-%d", name, p))
			}
			body, err := os.ReadFile(filepath.Join(dir, "partition.metadata"))
			id := topicid.String(before[name].ID)
			if err != nil || string(body) != "version: 0\ntopic_id: "+id+"\n" {
				t.Fatalf("%s: partition.metadata %q %v, want topic id %s", dir, body, err, id)
			}
		}
	}

	if err := os.RemoveAll(filepath.Join(dirA, "__kmirror_state")); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := run(append([]string{"serve"}, args...), &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "belongs to cluster "+clusterID) || !strings.Contains(errOut.String(), "kmirror storage rebuild") {
		t.Fatalf("serve without its state store: exit %d, stderr:\n%s", code, errOut.String())
	}
	code, info, stderr := storageCLI("info", "--log-dirs", logDirs)
	if code != 0 || !strings.Contains(info, "54 partition directories, 54 not named by the state store") ||
		!strings.Contains(info, "cluster.id="+clusterID) || !strings.Contains(info, "DOES NOT NAME IT") ||
		!strings.Contains(info, topicid.String(before["ledger"].ID)) {
		t.Fatalf("storage info: exit %d\n%s%s", code, info, stderr)
	}

	code, rebuilt, stderr := storageCLI("rebuild", "--log-dirs", logDirs)
	if code != 0 {
		t.Fatalf("rebuild: exit %d\n%s%s", code, rebuilt, stderr)
	}
	row := regexp.MustCompile(`ledger\s+3 partitions\s+topic id ` + regexp.QuoteMeta(topicid.String(before["ledger"].ID)) +
		` \(from partition.metadata\)`)
	if !row.MatchString(rebuilt) {
		t.Fatalf("rebuild output lacks ledger's row:\n%s", rebuilt)
	}
	for _, w := range []string{"cluster id " + clusterID + " (restored from meta.properties)", "registered 3 topics",
		"retention.bytes=-1, retention.ms=-1", "cluster mirrors", "Group offsets and transactions", "ACLs"} {
		if !strings.Contains(rebuilt, w) {
			t.Fatalf("rebuild output lacks %q:\n%s", w, rebuilt)
		}
	}
	code, info, _ = storageCLI("info", "--log-dirs", logDirs)
	if code != 0 || !strings.Contains(info, "cluster id "+clusterID+", 3 topics") || strings.Contains(info, "DOES NOT") {
		t.Fatalf("storage info after the rebuild: exit %d\n%s", code, info)
	}

	_, addr = startServe(t, args...)
	cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("ledger", "audit"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	after, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range topics {
		if a := after[name]; a.ID != before[name].ID || int32(len(a.Partitions)) != n {
			t.Fatalf("topic %s after the rebuild: id %s, %d partitions; want %s, %d", name,
				topicid.String(a.ID), len(a.Partitions), topicid.String(before[name].ID), n)
		}
	}
	if meta, err := adm.Metadata(ctx); err != nil || meta.Cluster != clusterID {
		t.Fatalf("cluster id after the rebuild: %q %v, want %s", meta.Cluster, err, clusterID)
	}
	// The group's offset is read back from __consumer_offsets, compacted.
	testutil.CheckFor(t, 20*time.Second, func() error {
		got, err := adm.FetchOffsets(ctx, "readers")
		if err != nil {
			return err
		}
		if o, ok := got.Lookup("ledger", 1); !ok || o.At != 17 {
			return fmt.Errorf("the group's offset after the rebuild: %+v %v, want 17", o, ok)
		}
		return nil
	})
	if rc, err := adm.DescribeTopicConfigs(ctx, "__consumer_offsets"); err != nil {
		t.Fatal(err)
	} else if c, err := rc.On("__consumer_offsets", nil); err != nil || !hasTopicConfig(c, "cleanup.policy", "compact") {
		t.Fatalf("__consumer_offsets after the rebuild: %v %+v, want cleanup.policy=compact", err, c)
	}
	// A new idempotent producer gets a producer id the logs do not know
	// already: the lost store's counter is not handed out again from 0.
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if newPID, _, err := p.ProducerID(ctx); err != nil || newPID <= pid {
		t.Fatalf("producer id after the rebuild %d (%v), want above %d, which the logs know", newPID, err, pid)
	}
	for name, n := range topics {
		for part := range n {
			v := fmt.Sprintf("%s-%d-after", name, part)
			want[v] = true
			if err := p.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: part, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("producing to %s-%d after the rebuild: %v", name, part, err)
			}
		}
	}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming (%d records still missing): %v", len(want), err)
		}
		fs.EachRecord(func(r *kgo.Record) { delete(want, string(r.Value)) })
	}
}

// Refusals: log dirs of two clusters, a store that names other topics
// (nothing changed in either case); per topic, partitions naming two ids
// and a missing partition, while the other topics are registered; a
// rerun (reading the node's server.properties) after the gap is mended
// registers the mended topic and keeps the others.
func TestStorageRebuildRefusals(t *testing.T) {
	t.Parallel()
	const clusterA, clusterB = "yVq3nrJ6Sx2y9Q5IF0Ht5A", "AQIDAAAAAAAAAAAAAAAAAA"
	idA, idB := "BAUGAAAAAAAAAAAAAAAAAA", "BwgJAAAAAAAAAAAAAAAAAA"
	logDir := func(t *testing.T, cluster string, parts map[string]string) string {
		t.Helper()
		d := t.TempDir()
		write := func(path, body string) {
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write(filepath.Join(d, "meta.properties"), "version=1\ncluster.id="+cluster+"\nnode.id=1\n")
		for name, id := range parts {
			if err := os.Mkdir(filepath.Join(d, name), 0o755); err != nil {
				t.Fatal(err)
			}
			if id != "" {
				write(filepath.Join(d, name, "partition.metadata"), "version: 0\ntopic_id: "+id+"\n")
			}
		}
		return d
	}

	t.Run("two clusters", func(t *testing.T) {
		t.Parallel()
		a, b := logDir(t, clusterA, map[string]string{"x-0": idA}), logDir(t, clusterB, map[string]string{"x-1": idA})
		code, _, stderr := storageCLI("rebuild", "--log-dirs", a+","+b)
		if code != 1 || !strings.Contains(stderr, "different clusters") || !strings.Contains(stderr, a) ||
			!strings.Contains(stderr, b) || !strings.Contains(stderr, "Nothing was changed") {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr)
		}
		if _, err := os.Stat(filepath.Join(a, "__kmirror_state")); err == nil {
			t.Fatal("the refused rebuild made a state store")
		}
	})

	t.Run("store names other topics", func(t *testing.T) {
		t.Parallel()
		d := logDir(t, clusterA, map[string]string{"x-0": idA})
		s, err := state.Open(filepath.Join(d, "__kmirror_state"), state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutTopic(state.Topic{Name: "other", ID: [16]byte{9}, Partitions: 2}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		code, _, stderr := storageCLI("rebuild", "--log-dirs", d)
		if code != 1 || !strings.Contains(stderr, "names topic other (2 partitions") || !strings.Contains(stderr, "move "+d) {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr)
		}
		s, err = state.Open(filepath.Join(d, "__kmirror_state"), state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if ts, err := s.Topics(); err != nil || len(ts) != 1 || s.ClusterID() == clusterA {
			t.Fatalf("the refused rebuild changed the store: %v %v, cluster id %s", ts, err, s.ClusterID())
		}
	})

	t.Run("per topic", func(t *testing.T) {
		t.Parallel()
		d := logDir(t, clusterA, map[string]string{"good-0": idA, "good-1": "", "twoids-0": idB, "twoids-1": idA,
			"gap-0": "", "gap-2": ""})
		code, out, stderr := storageCLI("rebuild", "--log-dirs", d)
		if code != 1 {
			t.Fatalf("exit %d, want 1 (a topic refused)\n%s%s", code, out, stderr)
		}
		for _, w := range []string{"registered 1 topics", "good  2 partitions  topic id " + idA,
			"twoids: its partitions name different topic ids (topic id " + idA + " in " + filepath.Join(d, "twoids-1"),
			"gap: partition 1 of 3 missing"} {
			if !strings.Contains(out, w) {
				t.Fatalf("output lacks %q:\n%s", w, out)
			}
		}
		if err := os.Mkdir(filepath.Join(d, "gap-1"), 0o755); err != nil {
			t.Fatal(err)
		}
		// The node's server.properties, as serve reads it, names the same dirs.
		cfg := writeConfig(t, "log.dirs="+d+"\nzookeeper.connect=zk:2181\n")
		code, out, _ = storageCLI("rebuild", "--config", cfg)
		if code != 1 || !strings.Contains(out, "gap  3 partitions") || !strings.Contains(out, "NEW: no partition.metadata") ||
			!strings.Contains(out, "already registered as the log dirs hold them, kept: good") {
			t.Fatalf("rerun: exit %d\n%s", code, out)
		}
	})
}

// hasTopicConfig reports whether rc holds name=value.
func hasTopicConfig(rc kadm.ResourceConfig, name, value string) bool {
	for _, c := range rc.Configs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}
