# kmirror build and test entry points. `make test` is what CI runs.
GO        ?= go
BIN       := bin/kmirror
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Packages with concurrency worth racing: the hot path, its stores, the
# partitions' roles and the replica fetchers, the network layer and the
# broker, and the end-to-end tests.
CORE_PKGS := ./batch/... ./meta/... ./node/... ./partition/... ./replicate/... ./mirrorapi/... ./verify/... ./storage/... ./internal/... ./netio/... ./state/... ./broker/... ./group/... ./fetch/... ./metrics/... ./tests/... ./control/... ./sync/... ./txn/... ./share/...
# Tests whose other side is a JVM (real Kafka, Kafka's tools) run once,
# without -race: racing them again doubles CI time for no kmirror code
# that the kfake-sourced tests do not already race.
RACE_SKIP := TestRealKafka|TestKafkaTools|TestJava
FUZZTIME  ?= 10s
BENCHTIME ?= 1s
BENCHCOUNT ?= 1

.PHONY: build test bench fuzz lint clean demo demo-cluster

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/kmirror

# -parallel: the JVM-backed tests hold a parallel slot for tens of seconds
# while mostly waiting on Kafka; with the default (GOMAXPROCS, 2 here) the
# short tests queue behind them until their own deadlines pass.
test: lint
	$(GO) test -count=1 -parallel 8 ./...
	$(GO) test -count=1 -parallel 4 -race -skip '$(RACE_SKIP)' $(CORE_PKGS)

# Two nodes on loopback: mirror, fail over, fail back (kmirror demo).
demo: build
	./$(BIN) demo

# A source node and a destination cluster of three: a node stopped
# mid-mirroring, the copy checked byte for byte, a failover with it down
# (kmirror demo --cluster).
demo-cluster: build
	./$(BIN) demo --cluster

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./...

# MirrorMaker 2 vs kmirror against real Kafka 4.4.0 (issue 9, perf/mm2):
# needs java and mvn, takes 5-15 minutes, so it is not part of `make test`.
# Extra flags: make bench-mm2 MM2FLAGS='--size 4GiB --partitions 16'.
.PHONY: bench-mm2
bench-mm2: build
	$(GO) run ./perf/mm2 --kmirror-bin $(BIN) --out perf/baselines/mm2-$$(date -u +%Y-%m-%d).txt $(MM2FLAGS)

# Produce throughput per codec against kmirror, kfake and real Kafka 4.4.0
# (issue 17 item 3, perf/produce): needs java and mvn, takes about 12
# minutes. Extra flags: make bench-produce PRODUCEFLAGS='--batch-size 16KiB,1MiB'.
.PHONY: bench-produce
bench-produce: build
	$(GO) run ./perf/produce --kmirror-bin $(BIN) --out perf/baselines/produce-codecs-$$(date -u +%Y-%m-%d).txt $(PRODUCEFLAGS)

# The metadata quorum against real Kafka 4.4.0 (issue 20, perf/cluster):
# metadata-write latency of a 3-node kmirror cluster and a 3-node KRaft
# cluster, then kill -9 of the controller to the next CreateTopics.
# Needs java and mvn, takes about 11 minutes. Extra flags:
# make bench-cluster CLUSTERFLAGS='--ops 1000 --kills 9'.
.PHONY: bench-cluster
bench-cluster: build
	$(GO) run ./perf/cluster --kmirror-bin $(BIN) --out perf/baselines/cluster-$$(date -u +%Y-%m-%d).txt $(CLUSTERFLAGS)

# The group coordinator against real Kafka 4.4.0 (perf/groups): OffsetCommit
# throughput (1 and 8 clients, each its own group) and rebalance time of a
# group of kgo consumers, 3-node kmirror vs 3-node KRaft, RF 3 topic and
# __consumer_offsets. Needs java and mvn, takes about 2 minutes. Extra
# flags: make bench-groups GROUPSFLAGS='--commits 10000 --rounds 20'.
.PHONY: bench-groups
bench-groups: build
	$(GO) run ./perf/groups --kmirror-bin $(BIN) --out perf/baselines/groups-$$(date -u +%Y-%m-%d).txt $(GROUPSFLAGS)

# Replication against real Kafka 4.4.0 (issue 21, perf/replication): a
# 3-node kmirror cluster and a 3-node KRaft cluster, RF 3, acks=all,
# kafka-producer-perf-test then kafka-consumer-perf-test after the
# leaders moved to former followers. Needs java and mvn, takes about 10
# minutes. Extra flags: make bench-replication REPLFLAGS='--records 2000000 --runs 5'.
.PHONY: bench-replication
bench-replication: build
	$(GO) run ./perf/replication --kmirror-bin $(BIN) --out perf/baselines/replication-$$(date -u +%Y-%m-%d).txt $(REPLFLAGS)

# A short pass over every fuzz target (FuzzX functions in *_fuzz_test.go).
fuzz:
	@set -e; for f in $$(grep -rl --include='*_fuzz_test.go' '^func Fuzz' .); do \
		dir=$$(dirname $$f); \
		for t in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | sed 's/^func //'); do \
			echo "fuzz $$dir $$t"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$dir; \
		done; \
	done

lint:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin
