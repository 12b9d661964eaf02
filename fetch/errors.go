package fetch

import (
	"errors"
	"fmt"
)

// ErrNotRetriable marks a failure that a retry cannot fix (the source
// topic was recreated, the source lost records this copy holds): the
// control plane fails the partition for good (RetryAttempt -1) until an
// operator acts. Test with errors.Is.
var ErrNotRetriable = errors.New("fetch: not retriable")

// permanentError wraps a failure that is not retriable without changing
// its message.
type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == ErrNotRetriable }

func permanent(err error) error { return &permanentError{err} }

// SourceTruncatedError says that the source no longer holds records this
// copy holds: its log for the partition ends (or diverges) below the local
// log end. While a partition is mirrored this is never repaired by cutting
// the copy: the copy may be the only place those records still exist. The
// control plane fails the partition, or, when the mirror's
// mirror.unclean.leader.election.enable is true, runs ULE_RECOVERY (a
// restart with StartAlign, which truncates to the source).
type SourceTruncatedError struct {
	Topic     string
	Partition int32
	// LocalEnd is the local log end; SourceEnd the offset the source's
	// log ends or diverges at, below it.
	LocalEnd, SourceEnd int64
	// How says what showed it: a diverging epoch, OFFSET_OUT_OF_RANGE.
	How string
}

func (e *SourceTruncatedError) Error() string {
	return fmt.Sprintf("the source no longer holds records this copy holds: %s-%d ends at %d at the source (%s) "+
		"and at %d here; the copy is kept. The source lost them (an unclean leader election, a restore) or the topic "+
		"was recreated: stop the topic to keep the copy as it is (failover), or set "+
		"mirror.unclean.leader.election.enable=true on the mirror to drop offsets %d-%d here and follow the source",
		e.Topic, e.Partition, e.SourceEnd, e.How, e.LocalEnd, e.SourceEnd, e.LocalEnd-1)
}

func (e *SourceTruncatedError) Is(target error) bool { return target == ErrNotRetriable }
