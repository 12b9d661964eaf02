package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
)

// The transactional produce benchmark (issue 11): what a transaction costs
// on kmirror's coordinator, against kfake's in-memory one, in one run.
//
//	go test -run '^$' -bench BenchmarkTxnProduce -count 5 ./bench/
//
// Only benchmarks here: `go test ./bench/` (make test) compiles this file
// and runs none of it.

// txnBenchRecords is the size of every benchmark transaction.
const txnBenchRecords = 100

// BenchmarkTxnProduce commits transactions of 100 records of 1 KiB
// (LoadValues, lz4, 1 MiB batches, acks=all) from one kgo transactional
// producer: one op is BeginTransaction, 100 async produces spread round
// robin over the partitions, Flush and EndTransaction(commit). MB/s are of
// uncompressed values (102,400 bytes per op); records/s is 100 per op;
// produce-ns/op (BeginTransaction to the end of Flush, which includes
// AddPartitionsToTxn) and endtxn-ns/op (EndTransaction) split ns/op.
//
//	kmirror  a node in-process, logs in a temporary directory. Per
//	         transaction the coordinator fsyncs its record at least three
//	         times (each AddPartitionsToTxn that adds a partition,
//	         PrepareCommit, CompleteCommit) and appends one COMMIT marker
//	         per partition; data batches are not fsynced (page cache, as
//	         Kafka's defaults).
//	kfake    franz-go's in-memory fake cluster, one broker, whose
//	         coordinator keeps transactions in memory.
//
// The producer id, metadata and connections come from one transaction
// before the timer. -count N runs each sub-benchmark N times in a row; on
// a shared machine also run -count 1 N times, which interleaves kmirror
// and kfake (BENCHMARKS.md). B/op and allocs/op count the whole process
// (kgo and the target run in it).
func BenchmarkTxnProduce(b *testing.B) {
	vals := LoadValues(benchValues, benchRecordBytes)
	for _, parts := range []int{1, 3} {
		for _, target := range []struct {
			name  string
			start func(b *testing.B, parts int) []string
		}{
			{"kmirror", startTxnKmirror},
			{"kfake", func(b *testing.B, parts int) []string {
				return kfaketest.Source(b, kfake.SeedTopics(int32(parts), benchTopic)).ListenAddrs()
			}},
		} {
			b.Run(fmt.Sprintf("partitions=%d/target=%s", parts, target.name), func(b *testing.B) {
				benchTxnProduce(b, target.start(b, parts), parts, vals)
			})
		}
	}
}

// startTxnKmirror starts a kmirror node with benchTopic at parts
// partitions.
func startTxnKmirror(b *testing.B, parts int) []string {
	br, _ := startBroker(b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, int32(parts), 1, nil, benchTopic); err != nil {
		b.Fatalf("creating %s: %v", benchTopic, err)
	}
	return []string{br.Addr()}
}

func benchTxnProduce(b *testing.B, addrs []string, parts int, vals [][]byte) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.DefaultProduceTopic(benchTopic),
		kgo.TransactionalID("bench-txn"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerBatchMaxBytes(benchBatchMaxBytes),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err != nil {
		b.Fatalf("creating the producer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	var errs produceErrs
	promise := errs.promise // bound once: a method value per call allocates
	next := 0
	// Where an op's time goes: BeginTransaction to the end of Flush
	// (AddPartitionsToTxn and the produce requests), and EndTransaction.
	var produceTook, endTook time.Duration
	txn := func() error {
		start := time.Now()
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for i := range txnBenchRecords {
			cl.Produce(ctx, &kgo.Record{Partition: int32(i % parts), Value: vals[next%len(vals)]}, promise)
			next++
		}
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		if err := errs.err(); err != nil {
			return err
		}
		flushed := time.Now()
		err := cl.EndTransaction(ctx, kgo.TryCommit)
		produceTook += flushed.Sub(start)
		endTook += time.Since(flushed)
		return err
	}
	if err := txn(); err != nil {
		b.Fatalf("warm-up transaction: %v", err)
	}
	produceTook, endTook = 0, 0
	b.SetBytes(txnBenchRecords * benchRecordBytes)
	b.ReportAllocs()
	for b.Loop() {
		if err := txn(); err != nil {
			b.Fatalf("transaction %d: %v", next/txnBenchRecords, err)
		}
	}
	b.ReportMetric(float64(b.N*txnBenchRecords)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(produceTook.Nanoseconds())/float64(b.N), "produce-ns/op")
	b.ReportMetric(float64(endTook.Nanoseconds())/float64(b.N), "endtxn-ns/op")
}
