package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
)

const (
	dashboardPath = "../../deploy/grafana/kmirror.json"
	rulesPath     = "../../deploy/prometheus/kmirror-rules.yml"
)

// The dashboard and the alert rules under deploy/ query only metrics a
// mirroring node exports (issue 18 item 5): a node mirrors a kfake source
// (one fetch answered with an error, so the per-error series exists too),
// its /metrics is scraped, and every metric name in every PromQL
// expression of both files must be in the scrape. The rules file must also
// have Prometheus' rule-group shape, and both must cover what the issue
// asks for: lag in records, bytes and seconds, throughput, partition
// states, sync errors, disk use; alerts on the RPO, FAILED and stalled
// partitions, sync errors and a filling log dir.
func TestDeployQueriesExportedMetrics(t *testing.T) {
	t.Parallel()
	dash, err := dashboardQueries(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ruleQueries(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	queried := map[string][]string{} // metric name -> where it is queried
	collect := func(file string, queries map[string]string) []string {
		var all []string
		for where, q := range queries {
			ms, err := promqlMetrics(q)
			if err != nil || len(ms) == 0 {
				t.Fatalf("%s, %s: %q: metrics %q, %v", file, where, q, ms, err)
			}
			for _, m := range ms {
				queried[m] = append(queried[m], file+", "+where)
			}
			all = append(all, ms...)
		}
		return all
	}
	inDashboard, inRules := collect(dashboardPath, dash), collect(rulesPath, rules)
	for _, m := range []string{"kmirror_mirror_lag_records", "kmirror_mirror_lag_bytes", "kmirror_mirror_lag_seconds",
		"kmirror_mirror_bytes_total", "kmirror_mirror_partition_states", "kmirror_mirror_sync_errors_total",
		"kmirror_disk_free_bytes"} {
		if !slices.Contains(inDashboard, m) {
			t.Errorf("the dashboard does not show %s", m)
		}
	}
	for _, m := range []string{"kmirror_mirror_lag_seconds", "kmirror_mirror_partition_states", "kmirror_mirror_stalled_partitions",
		"kmirror_mirror_sync_errors_total", "kmirror_disk_free_bytes"} {
		if !slices.Contains(inRules, m) {
			t.Errorf("no alert rule queries %s", m)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(3, demoTopic))
	if err := produceDemo(ctx, src.ListenAddrs()[0], 30, "a"); err != nil {
		t.Fatal(err)
	}
	failOneFetch(src)
	n := startMirrorsNode(t, "dest")
	if err := mirrorTo(ctx, n, "dr", src.ListenAddrs()[0]); err != nil {
		t.Fatal(err)
	}
	n.Mirrors.SyncOnce()
	srv := httptest.NewServer(n.MetricsHandler(false))
	defer srv.Close()
	testutil.CheckFor(t, 30*time.Second, func() error {
		exported, err := scrapeNames(ctx, srv.URL+"/metrics")
		if err != nil {
			return err
		}
		var missing []string
		for m, where := range queried {
			if !exported[m] {
				missing = append(missing, fmt.Sprintf("%s (%s)", m, strings.Join(where, "; ")))
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			return fmt.Errorf("queried but not exported:\n\t%s", strings.Join(missing, "\n\t"))
		}
		return nil
	})
}

// failOneFetch answers the first source Fetch that names a partition with
// NOT_LEADER_OR_FOLLOWER for each (the fetcher looks the leader up again
// and goes on), so kmirror_mirror_errors_total{error} has a series.
func failOneFetch(src *kfake.Cluster) {
	src.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, len(resp.Topics) > 0 // until then, an observer
	})
}

// scrapeNames returns the names of the samples a /metrics scrape holds
// (a summary's _sum and _count included).
func scrapeNames(ctx context.Context, url string) (map[string]bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names, sc.Err()
}

// The metric names of a PromQL expression: not functions, keywords,
// aggregations, label names, durations, strings or Grafana variables.
func TestPromQLMetrics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want []string
		bad  bool
	}{
		{expr: `max by (mirror, topic) (kmirror_mirror_lag_seconds{mirror=~"$mirror", topic=~"a{b}"}) > 300`,
			want: []string{"kmirror_mirror_lag_seconds"}},
		{expr: `rate(a_sum[$__rate_interval]) / rate(a_count[5m:1m])`, want: []string{"a_sum", "a_count"}},
		{expr: `sum without (le) (x) and on (job) group_left (instance) y offset 5m`, want: []string{"x", "y"}},
		{expr: `predict_linear(free[6h], 24 * 3600) < 0.5e1 and free / total < 0.10`, want: []string{"free", "free", "total"}},
		{expr: `label_values(kmirror_mirror_lag_records{mirror=~"$mirror"}, topic)`, want: []string{"kmirror_mirror_lag_records"}},
		{expr: `label_values(topic)`},
		{expr: `sum(x{a="\""}) by (b)`, want: []string{"x"}},
		{expr: `${datasource_var} + up`, want: []string{"up"}},
		{expr: `sum(x`, bad: true},
		{expr: `x{a="b"`, bad: true},
		{expr: `x{a="b}`, bad: true},
		{expr: `x]`, bad: true},
	} {
		got, err := promqlMetrics(tc.expr)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q (error: %v)", tc.expr, got, err, tc.want, tc.bad)
		}
	}
}

// The rules reader takes Prometheus' rule-group shape in plain block YAML
// and refuses what it cannot check.
func TestRuleQueriesShape(t *testing.T) {
	t.Parallel()
	const good = `# c
groups:
- name: g
  rules:
    - alert: A
      # comment
      expr: sum by (m) (x{s="F"}) > 0
      for: 2m
      labels:
        severity: critical
      annotations:
        summary: "it: {{ $labels.m }}"
        description: 'it''s'
    - record: r:x:sum
      expr: sum(x)
`
	for _, tc := range []struct {
		name, doc, wantErr string
	}{
		{name: "good", doc: good},
		{name: "no groups", doc: "rules:\n  - alert: A\n", wantErr: "groups only"},
		{name: "alert and record", doc: strings.Replace(good, "      for: 2m\n", "      for: 2m\n      record: r\n", 1), wantErr: "one new alert or record"},
		{name: "no expr", doc: strings.Replace(good, "      expr: sum(x)\n", "", 1), wantErr: "one new alert or record"},
		{name: "bad for", doc: strings.Replace(good, "for: 2m", "for: 2 minutes", 1), wantErr: "no duration"},
		{name: "unknown key", doc: strings.Replace(good, "for: 2m", "fore: 2m", 1), wantErr: "unknown key fore"},
		{name: "no severity", doc: strings.Replace(good, "severity: critical", "team: x", 1), wantErr: "severity"},
		{name: "flow mapping", doc: strings.Replace(good, "        severity: critical\n", "        {severity: critical}\n", 1), wantErr: "line 10: want key: value"},
		{name: "block scalar", doc: strings.Replace(good, "expr: sum(x)", "expr: |", 1) + "        sum(x)\n", wantErr: "outside the YAML subset"},
		{name: "trailing comment", doc: strings.Replace(good, "for: 2m", "for: 2m # two", 1), wantErr: "outside the YAML subset"},
		{name: "bad indentation", doc: strings.Replace(good, "      for: 2m", "        for: 2m", 1), wantErr: "indentation"},
		{name: "duplicate key", doc: strings.Replace(good, "      for: 2m", "      for: 2m\n      for: 3m", 1), wantErr: "twice"},
	} {
		path := writeTestFile(t, "rules.yml", tc.doc)
		got, err := ruleQueries(path)
		switch {
		case tc.wantErr == "" && (err != nil || got["A"] != `sum by (m) (x{s="F"}) > 0` || got["r:x:sum"] != "sum(x)"):
			t.Errorf("%s: %q, %v", tc.name, got, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.wantErr)
		}
	}
}
