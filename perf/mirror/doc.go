// Package mirror is the end-to-end mirroring benchmark behind
// `kmirror bench` (STYLE.md item 31): a source cluster, a topic filled
// once with generated data, and three ways of copying that topic, measured
// on the same data, the same partitions and the same fetch sizes.
//
//	source                        measured side (this process)
//	+--------------+   Fetch      +-----------------------------------------+
//	| kmirror node |  ----------> | mirror:   fetch.Manager -> kmirror node |
//	| (child or    |              |           (storage/)                    |
//	| in-process), |  ----------> | drain:    bare Fetch loop, discards     |
//	| kfake, or an |              |                                         |
//	| external     |  ----------> | pipeline: kgo consumer -> kgo producer  |
//	| cluster      |              |           (recompressing) -> kmirror    |
//	+--------------+              +-----------------------------------------+
//
// Modes:
//
//   - mirror: a kmirror node in temporary directories and a fetch.Manager
//     that mirrors every partition into it (the product).
//   - drain: the ceiling of any fetch-based copier: the same Fetch
//     requests (same partitions per connection, same response and
//     partition max bytes, same max wait) over a plain socket, each
//     response decoded with kmsg as the fetchers do and its batches walked
//     to find the next offset, then discarded. No CRC check, no append.
//   - pipeline: the MirrorMaker 2 cost model written with kgo: a consumer
//     on the source (decompressing and decoding every record) and a
//     producer recompressing them (the fill codec, lz4 by default) into a
//     plain topic of a kmirror node, record partition kept.
//
// What is measured, per mode, from the moment the copy starts (the mirror
// node and clients are set up before) until every partition reached the
// source's end offsets (or Options.Duration):
//
//   - MB/s: source segment bytes (compressed batches, 10^6 B) moved per
//     second. Every mode counts the same bytes, so ratios compare directly.
//   - records/s: source records moved per second.
//   - lag p50/p99: sampled every 100 ms, source high watermark minus the
//     local end summed over partitions, in records (fetch.Status for the
//     mirror, the drained or acknowledged offsets for the others). The
//     source is not written during the phase, so this is the backlog as it
//     drains; with Duration or a throttle it becomes a steady-state lag.
//   - CPU s/GB: user+system CPU seconds of this process (getrusage) per
//     10^9 source segment bytes.
//   - peak RSS: the largest VmRSS sample of this process (VmHWM cannot be
//     reset, so it would include the fill).
//
// When the source runs in this process (Options.SourceExe empty) its CPU
// and memory are in those numbers too; Result.Source.InProcess says so and
// the table prints it. With SourceExe set, a kmirror or kfake source runs
// as a child process of that binary (`kmirror serve`, or
// `kmirror bench --kfake-source`) and its CPU is reported apart.
package mirror
