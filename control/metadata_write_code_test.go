package control

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/meta"
)

// A mirror RPC whose write the metadata log refused during an election
// answers NOT_CONTROLLER, which `kmirror mirrors` sends again at the new
// controller; it used to answer UNKNOWN_SERVER_ERROR, which nothing
// retries.
func TestMetadataWriteCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want *kerr.Error
	}{
		{fmt.Errorf("storing the mirror: %w", meta.ErrNotController), kerr.NotController},
		{fmt.Errorf("committing: %w", context.DeadlineExceeded), kerr.RequestTimedOut},
		{errors.New("disk full"), kerr.UnknownServerError},
	} {
		if got := metadataWriteCode(c.err); got != c.want.Code {
			t.Errorf("%v: %v, want %v", c.err, kerr.ErrorForCode(got), c.want)
		}
	}
}
