// Package batch reads and patches Kafka RecordBatch v2 (magic 2) bytes in place.
//
// kmirror's promise is "bytes are the source's" (DESIGN.md decision 2): a batch
// fetched from the source is checked, optionally patched, and appended without
// its records ever being decoded or decompressed. This package is therefore a
// set of views over byte slices, never a decoder into structs. Every function on
// the hot path (view, iterate, validate, patch) performs zero allocations.
//
// # Wire format
//
// A RecordBatch v2 is a fixed 61-byte header followed by the (possibly
// compressed) records. All integers are big endian. These constants are part of
// the wire format:
//
//	offset  size  field
//	     0     8  base offset
//	     8     4  batch length (bytes after this field: total size - 12)
//	    12     4  partition leader epoch
//	    16     1  magic (2)
//	    17     4  CRC32C (Castagnoli) of bytes [21, end)
//	    21     2  attributes
//	    23     4  last offset delta
//	    27     8  base timestamp
//	    35     8  max timestamp
//	    43     8  producer id
//	    51     2  producer epoch
//	    53     4  base sequence
//	    57     4  record count
//	    61     -  records
//
//	attributes:  bits 0-2 compression codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)
//	             bit 3    timestamp type (0 create time, 1 log append time)
//	             bit 4    transactional
//	             bit 5    control
//	             bit 6    delete horizon set (compaction)
//
// The base offset and the partition leader epoch sit before the CRC range, so a
// broker can restamp them without touching the checksum. Everything from the
// attributes on is covered by the CRC: patching the producer id requires a new
// checksum, which Patch computes from the old one in time independent of the
// batch size (see crc.go).
//
// Legacy message sets (magic 0 and 1) share the first 17 bytes' layout (offset,
// size, CRC at 12, magic at 16), which is how the iterator recognises and
// reports them with ErrLegacyMagic instead of misreading them.
package batch
