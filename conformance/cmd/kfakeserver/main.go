// Command kfakeserver runs franz-go's kfake, an in-memory fake Kafka broker,
// behind the command line of `samsa server`, so that the conformance driver
// can run against it: `go test -samsa $(go build …)/kfakeserver`. It checks
// the runners themselves on scenarios the broker does not have yet (groups,
// transactions); it is not part of the compatibility table.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	// The arguments of `samsa server` (--override k=v) are accepted and
	// ignored.
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(-1))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Fprintf(os.Stderr, "kfake started bootstrap=%s\n", c.ListenAddrs()[0])
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
