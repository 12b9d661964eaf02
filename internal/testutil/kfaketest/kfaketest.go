// Package kfaketest starts franz-go's kfake, an in-process Kafka, as a
// test's mirror source (KFAKE.md). It imports no kmirror package, so the
// tests of the packages the broker imports (fetch, replicate) can use it
// without an import cycle; the node harness is nodetest.
package kfaketest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Source starts a one-broker kfake cluster with opts (kfake.NumBrokers in
// opts overrides the one broker), closed when the test ends; closing it
// earlier, to take the source away, is fine.
func Source(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	src, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("starting kfake: %v", err)
	}
	t.Cleanup(src.Close)
	return src
}
