// Package verify is the byte-level audit behind `kmirror mirrors --verify`
// (issue 18 item 1): it reads a partition of a mirror's copy and the same
// partition at the source, once each and in offset order, and compares
// them batch by batch over the offsets both hold.
//
// # What is compared
//
// A mirror stores the source's RecordBatch bytes at the source's offsets
// (DESIGN.md decisions 1 and 2), so two batches are the same when their
// headers say so: the tuple
//
//	(base offset, last offset, length, CRC32C)
//
// is compared, and each side's CRC32C is recomputed over the bytes it
// covers (attributes to the end of the batch, which is everything but the
// base offset, the length and the partition leader epoch). Equal lengths
// and equal, correct checksums mean equal bytes in practice (a CRC32C is
// no cryptographic hash: a deliberate collision is not what this audit
// guards against). The leader epoch is left out on purpose: the copy keeps
// the source's, but nothing promises it, and it is outside the CRC on both
// sides. Transaction markers and other control batches compare like any
// batch.
//
// # The window
//
// Per partition, from each side's log start and high watermark (the source
// read once at the start; a live source keeps growing, so its high
// watermark past the copy's is simply not compared):
//
//	source        [S0 ........................ SH)
//	copy                [C0 ............ CE)  (CE: the copy's high
//	compared            [max(S0,C0), min(SH,CE))  watermark, or for a
//	                                              STOPPED partition the
//	                                              offset mirroring stopped at)
//
// Inside the window both sides' batches are merged by base offset, holding
// one response per side at a time (never a whole partition): a pair with
// equal tuples is identical; a pair that differs, a batch only one side has
// and a batch damaged on either side (its bytes fail its CRC32C) are
// differences, and the first one's offset is reported. Outside it, the
// offsets only one side holds are reported as ranges and are not
// differences:
//
//   - only in the copy, source-log-start: below the source's log start (its
//     retention or DeleteRecords removed them after they were mirrored; a
//     mirroring copy's log start follows the source's, so this is mostly a
//     stopped topic's);
//   - only in the copy, after-source-end: past the source's high watermark
//     (the source lost a tail, or this is a stopped topic's copy written to
//     after the failover);
//   - only in the copy, written-after-stop: a STOPPED partition's offsets
//     from where mirroring stopped (the failover's markers and the writes
//     that followed);
//   - not copied, before-copy-start: below the copy's log start. A mirror
//     started at the latest offset never had them, and the copy's own
//     retention may have removed them; the copy cannot tell which, so this
//     is reported as what it is, not as a gap;
//   - not copied, after-copy-end: past the copy's high watermark (a live
//     mirror's lag);
//   - not copied, source-after-stop: a STOPPED partition's source offsets
//     from where mirroring stopped: records the copy never got, which a
//     failback would drop from the source.
//
// Inside the window, a source batch the copy lacks is listed as missing in
// the copy (copy-lacks-batch), a copy batch the source lacks as only in the
// copy (source-lacks-batch); both are differences. A compacted topic is
// compared like any other: each side compacts on its own schedule, so
// batches cleaned on one side only differ, and the result says the topic
// is compacted (Result.Compacted) so the report can say why.
package verify
