// Command samsa is the Samsa binary: a Kafka-compatible broker and controller
// (samsa server) and the tools that talk to it.
package main

import (
	"os"

	"github.com/samsahq/samsa/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
