package fetch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/batch"
)

// marker is a valid one-record batch at base with timestamp ts.
func marker(base, ts int64) batch.Batch {
	return batch.Batch(batch.AppendTxnMarker(nil, batch.TxnMarker{BaseOffset: base, Timestamp: ts, ProducerID: 7}))
}

// TestSameBatch: the identity check of sources without topic ids calls a
// batch the same only with the same offsets, length and CRC32C; after a
// producer id rewrite (CRC patched here) the timestamps stand in.
func TestSameBatch(t *testing.T) {
	t.Parallel()
	local := marker(10, 1000)
	rewritten := batch.Batch(bytes.Clone(local))
	rewritten.SetProducerID(1<<62 + 7)
	for _, tc := range []struct {
		name      string
		source    batch.Batch
		rewritten bool
		want      bool
	}{
		{"identical", marker(10, 1000), false, true},
		{"none at the source", nil, false, false},
		{"other offset", marker(11, 1000), false, false},
		{"other bytes", marker(10, 1001), false, false},
		{"rewritten here, same timestamps", marker(10, 1000), true, true},
		{"rewritten here, other timestamps", marker(10, 1001), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := local
			if tc.rewritten {
				l = rewritten
			}
			if got := sameBatch(l, tc.source, tc.rewritten); got != tc.want {
				t.Fatalf("sameBatch = %v, want %v", got, tc.want)
			}
		})
	}
	if rewritten.CRC() == local.CRC() {
		t.Fatal("the rewrite left the CRC: the rewritten cases test nothing")
	}
}

// TestNotRetriable: the failures that must never be retried are marked
// for errors.Is, through wrapping, and keep their message.
func TestNotRetriable(t *testing.T) {
	t.Parallel()
	truncated := &SourceTruncatedError{Topic: "t", Partition: 1, LocalEnd: 100, SourceEnd: 51, How: "diverging epoch"}
	recreated := permanent(errors.New("source topic t has topic id A, this copy B"))
	for _, err := range []error{truncated, recreated, fmt.Errorf("partition 1: %w", truncated)} {
		if !errors.Is(err, ErrNotRetriable) {
			t.Errorf("%v: not marked ErrNotRetriable", err)
		}
	}
	if errors.Is(errors.New("connection refused"), ErrNotRetriable) {
		t.Error("a plain error is marked ErrNotRetriable")
	}
	if recreated.Error() != "source topic t has topic id A, this copy B" {
		t.Errorf("permanent changed the message: %q", recreated)
	}
	for _, want := range []string{"t-1", "ends at 51", "at 100 here", "mirror.unclean.leader.election.enable", "51-99"} {
		if !strings.Contains(truncated.Error(), want) {
			t.Errorf("%q lacks %q", truncated, want)
		}
	}
}
