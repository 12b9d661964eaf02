package meta

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// WriteError is the Kafka error of a request whose metadata log write
// failed: NOT_CONTROLLER while the quorum has no leader or leadership
// moved (ErrNotController; clients retry it at the new controller, as
// they retry Kafka's), REQUEST_TIMED_OUT when the entry was not
// committed in time, and otherwise, for a failure of the store or the
// request itself, the caller's error. The broker's topic admin and the
// mirror RPCs answer through it.
func WriteError(err error, otherwise *kerr.Error) *kerr.Error {
	switch {
	case errors.Is(err, ErrNotController):
		return kerr.NotController
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut
	}
	return otherwise
}
