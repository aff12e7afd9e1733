package samsa_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIdleConsumerCPU measures, when SAMSA_IDLE_CONSUMER_CPU is set, the
// CPU (user+system of the test process: the node and the client) over
// 60 s of one franz-go consumer, with its default fetch settings, of
// 10,000 empty partitions (100 topics x 100) once its fetch session is
// open: the figure of docs/BENCHMARKS.md, "Consumer fetch sessions".
// Skipped otherwise: it is a measurement, not a check.
func TestIdleConsumerCPU(t *testing.T) {
	if os.Getenv("SAMSA_IDLE_CONSUMER_CPU") == "" {
		t.Skip("a measurement: set SAMSA_IDLE_CONSUMER_CPU=1")
	}
	n := startNode(t, t.TempDir(), nil)
	adm := newClient(t, n)
	var topics []string
	for i := range 100 {
		topic := fmt.Sprintf("idle%03d", i)
		createTopic(t, adm, topic, 100, nil)
		topics = append(topics, topic)
	}
	cl := newClient(t, n, kgo.ConsumeTopics(topics...))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Two polls with nothing to read: franz-go's fetches wait 5 s each
	// (fetch.max.wait.ms), so the session is open and every partition
	// read once by then.
	for range 2 {
		pctx, pcancel := context.WithTimeout(ctx, 6*time.Second)
		cl.PollFetches(pctx).EachError(func(_ string, p int32, err error) {
			if ctx.Err() == nil && pctx.Err() == nil {
				t.Fatalf("fetch %d: %v", p, err)
			}
		})
		pcancel()
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before := cpu()
	pctx, pcancel := context.WithTimeout(ctx, time.Minute)
	defer pcancel()
	for pctx.Err() == nil {
		cl.PollFetches(pctx)
	}
	t.Logf("idle consumer of 10,000 partitions: %.2f s of CPU over 60 s", (cpu() - before).Seconds())
}
