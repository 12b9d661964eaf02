// Package testutil holds helpers that tests of several packages share:
// CheckFor, the one way a test waits for a condition, and on Linux a small
// tmpfs for full-disk tests (Tmpfs, FillDisk).
//
// It imports the standard library only, so that the tests of every
// package, the broker's and the log store's included, can import it
// without an import cycle. The node harness, which needs the broker, lives
// in the sub-package nodetest; the kfake source in kfaketest.
package testutil
