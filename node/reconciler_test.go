package node

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/state"
)

// fakeBroker fails its first `fails` Reconciles and records what each was
// asked.
type fakeBroker struct {
	mu    sync.Mutex
	fails int
	asked []state.Changes
}

func (f *fakeBroker) Reconcile(c state.Changes) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, c)
	if f.fails > 0 {
		f.fails--
		return errors.New("a log that cannot open")
	}
	return nil
}

// An entry that changes nothing the broker holds is covered at once; one
// that does is covered once a run succeeds, and a failed run is retried
// with its kinds, not reported as covered.
func TestReconcilerCoversOnlyWhatItApplied(t *testing.T) {
	t.Parallel()
	r := newReconciler()
	fb := &fakeBroker{fails: 1}
	go r.run(fb, slog.New(slog.DiscardHandler))
	defer r.halt(true)

	r.changed(0, 3) // a mirror partition's state
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := r.waitCovered(ctx, 3); err != nil {
		t.Fatalf("an entry changing nothing: %v", err)
	}

	r.changed(state.ChangedTopics, 4)
	short, cancelShort := context.WithTimeout(t.Context(), reconcileRetry/2)
	defer cancelShort()
	if err := r.waitCovered(short, 4); err == nil {
		t.Fatal("entry 4 covered by a run that failed")
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 5*reconcileRetry)
	defer cancel2()
	if err := r.waitCovered(ctx2, 4); err != nil {
		t.Fatalf("entry 4 after the retry: %v", err)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.asked) != 2 || fb.asked[0] != state.ChangedTopics || fb.asked[1] != state.ChangedTopics {
		t.Fatalf("runs asked %v, want the topics twice (the failure, the retry)", fb.asked)
	}
}
