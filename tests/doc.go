// Package tests holds kmirror's black-box end-to-end tests. Nothing here is
// imported by the binary: the package exists for its _test.go files, which
// see the broker only from the outside, the way clients do.
//
// Each test starts its own node in-process (broker.New on 127.0.0.1 port 0,
// log directories under t.TempDir), then drives it with real, independent
// client implementations: franz-go's kgo and kadm, and librdkafka through
// the kcat binary (installed by .ci/run; under CI a missing kcat fails the
// kcat tests instead of skipping them). Restarts are Close then broker.New
// on the same configuration and directories.
//
// Later suites will add kfake and real Apache Kafka clusters as mirror
// sources. Unit tests stay next to the code they test; this package is for
// what only a whole node and a real client can show.
package tests
