package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// shareCount is how many records the share-group scenario produces (over
// the topic's 3 partitions).
const shareCount = 300

// scenarioShareGroup: two share consumers (KIP-932) of one group read a
// topic of 3 partitions; every record whose index is 7 mod 25 is rejected,
// every one whose index is 3 mod 10 is released on its first delivery (and
// comes back, to any member, with a higher delivery count); the rest are
// accepted. The first consumer is closed after it accepted 60 records and
// a third one takes its place. In the end every record was accepted once
// or rejected, none was accepted twice, and each released one came back.
// The driver checks from the broker's side that every share-partition's
// start offset reached the log end (DescribeShareGroupOffsets).
func scenarioShareGroup(ctx context.Context, c client) error {
	fc, ok := c.(*franzClient)
	if !ok {
		name := opts.client
		if _, ok := c.(*confluentClient); ok {
			name = "librdkafka"
		}
		return na{name + " has no share consumer (KIP-932)"}
	}
	if err := c.produce(ctx, opts.topic, "none", makeRecords("share", shareCount, 3), false); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	var (
		mu        sync.Mutex
		accepted  = map[int]int{}
		rejected  = map[int]bool{}
		released  = map[int]bool{}
		returned  = map[int]bool{} // released, then delivered again
		errs      []error
		firstDone = make(chan struct{})
	)
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted)+len(rejected) >= shareCount
	}
	consume := func(name string, stopAfter int, stopped chan<- struct{}) {
		cl, err := kgo.NewClient(fc.opts(kgo.ShareGroup(opts.group), kgo.ConsumeTopics(opts.topic),
			kgo.FetchMaxWait(500*time.Millisecond), kgo.ShareMaxRecords(20))...)
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			return
		}
		defer cl.Close()
		if stopped != nil {
			// Closed however this consumer ends, so that the one
			// waiting to replace it does not wait for the deadline when
			// the others took every record first.
			defer close(stopped)
		}
		mine := 0
		for ctx.Err() == nil && !done() {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pctx)
			cancel()
			mu.Lock()
			for _, r := range fs.Records() {
				i, err := strconv.Atoi(strings.TrimPrefix(string(r.Key), "key-"))
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: record key %q", name, r.Key))
					continue
				}
				if released[i] && r.DeliveryCount() >= 2 {
					returned[i] = true
				}
				switch {
				case i%25 == 7:
					r.Ack(kgo.AckReject)
					rejected[i] = true
				case i%10 == 3 && !released[i]:
					r.Ack(kgo.AckRelease)
					released[i] = true
				default:
					r.Ack(kgo.AckAccept)
					accepted[i]++
					mine++
				}
			}
			mu.Unlock()
			if err := cl.FlushAcks(ctx); err != nil && ctx.Err() == nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: flushing acknowledgements: %w", name, err))
				mu.Unlock()
				return
			}
			if stopAfter > 0 && mine >= stopAfter {
				logf("%s: closing after %d accepted", name, mine)
				return
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { consume("consumer 1", 60, firstDone) })
	wg.Go(func() { consume("consumer 2", 0, nil) })
	wg.Go(func() {
		select {
		case <-firstDone:
			consume("consumer 3", 0, nil)
		case <-ctx.Done():
		}
	})
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%d accepted and %d rejected of %d records: %w", len(accepted), len(rejected), shareCount, err)
	}
	for i, n := range accepted {
		if n > 1 {
			return fmt.Errorf("record %d accepted %d times", i, n)
		}
		if rejected[i] {
			return fmt.Errorf("record %d accepted and rejected", i)
		}
	}
	for i := range shareCount {
		if accepted[i] == 0 && !rejected[i] {
			return fmt.Errorf("record %d neither accepted nor rejected", i)
		}
		if i%10 == 3 && i%25 != 7 && !returned[i] {
			return fmt.Errorf("record %d released but not delivered again with a higher delivery count", i)
		}
	}
	logf("%d accepted, %d rejected, %d released and delivered again", len(accepted), len(rejected), len(returned))
	return nil
}
