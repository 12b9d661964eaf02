// Command install fetches the Apache Kafka versions the tests run
// (realkafka.Versions) into the cache, for .ci/run:
//
//	go run ./internal/realkafka/install
package main

import (
	"fmt"
	"os"

	"github.com/kmirror/kmirror/internal/realkafka"
)

func main() {
	for _, v := range realkafka.Versions {
		libs, err := realkafka.Install(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("Apache Kafka", v, "in", libs)
	}
}
