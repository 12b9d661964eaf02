// Package bench holds kmirror's go test -bench harnesses, micro first, and
// the load-generation helpers they share with the macro benchmarks to come
// (perf/, `kmirror bench`).
//
// The micro benchmarks here measure the claim behind DESIGN.md decision 2:
// checking and patching a RecordBatch in place (batch.Parse, Verify,
// RewriteProducerID) costs about one CRC32C pass, while the MirrorMaker-style
// path (decompress, decode every record, re-encode, recompress, new CRC)
// costs several times more for uncompressed batches and two to three orders
// of magnitude more for compressed ones. Results and the command that
// reproduces them live in BENCHMARKS.md at the repository root.
//
// The non-test helpers are deterministic so that runs are comparable with
// benchstat:
//
//   - GenBatch builds realistic RecordBatch v2 bytes of a target size for
//     every codec, compressed the way Kafka clients compress them.
//   - Codecs compresses and decompresses record sections, reusing its
//     encoders, decoders and buffers.
//   - Recompressor is the decompress/decode/re-encode/recompress baseline.
//
// None of this is on kmirror's hot path; it allocates freely during setup
// and is not safe for concurrent use unless a type says otherwise.
package bench
