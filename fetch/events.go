package fetch

// Events. A partition's lifecycle (the KIP-1279 states, FAILED and its
// retries) belongs to the control plane; the fetchers only say what
// happened to the partitions they were given, through Config.Events:
//
//   - EventFetching: the source accepted the partition's fetch position
//     (its first answer without an error since StartPartition). A
//     partition started with StartAlign is aligned from then on, and a
//     retried one works again.
//   - EventFailed: the partition stopped on an error no fetch retry can
//     fix (a corrupt batch, a storage failure, a source topic recreated or
//     a source that lost records: errors.Is(Err, ErrNotRetriable)). It
//     stays stopped until StartPartition or StopPartition.
//
// Errors a fetch retry fixes (a leader that moved, a connection that
// broke, UNKNOWN_LEADER_EPOCH) are the fetch protocol's (SPEC.md section
// 5): the partition goes back to the resolver, without an event.
//
// An event is sent once per occasion and never per batch: the per-batch
// path only tests a flag it already holds the lock for.

// EventKind says what an Event reports.
type EventKind int8

const (
	// EventFetching: the source accepted the fetch position.
	EventFetching EventKind = iota
	// EventFailed: stopped on an error a retry of the fetch cannot fix.
	EventFailed
)

// Event is what a fetcher reports about one partition.
type Event struct {
	Mirror    string
	Topic     string
	Partition int32
	Kind      EventKind
	// Err is why the partition failed (EventFailed).
	Err error
}

// event reports ev for ps to Config.Events, if set. It holds no lock.
func (ps *partState) event(kind EventKind, err error) {
	if fn := ps.mirror.m.events; fn != nil {
		fn(Event{Mirror: ps.mirror.cfg.Name, Topic: ps.tp.topic, Partition: ps.tp.partition, Kind: kind, Err: err})
	}
}
