package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// compactedReadBound is how long compacted-read lets a client read the
// compacted log (a few dozen records; a healthy client needs well under
// a second once connected) before it reports a stall.
const compactedReadBound = 40 * time.Second

// scenarioCompactedRead reads partition 0 of the compacted topic the
// driver prepared from its earliest offset to its last offset (the log end
// offset minus one, a live record), prints the key→value map seen on a
// DATA line for the driver to check, and fails when the client stalls or
// delivers an offset again.
func scenarioCompactedRead(ctx context.Context, c client) error {
	end, err := c.offsetForTime(ctx, opts.topic, 0, -1)
	if err != nil {
		return fmt.Errorf("ListOffsets latest: %w", err)
	}
	if end <= 0 {
		return fmt.Errorf("ListOffsets latest: %d: the topic is empty", end)
	}
	rctx, cancel := context.WithTimeout(ctx, compactedReadBound)
	defer cancel()
	values := map[string]*string{}
	n, last := 0, int64(-1)
	start := time.Now()
	err = c.consumeFrom(rctx, opts.topic, 0, func(r record) (bool, error) {
		if r.Offset <= last {
			return true, fmt.Errorf("looped: offset %d delivered after offset %d (record %d)", r.Offset, last, n+1)
		}
		last = r.Offset
		n++
		if r.Value == nil {
			values[string(r.Key)] = nil
		} else {
			v := string(r.Value)
			values[string(r.Key)] = &v
		}
		return r.Offset >= end-1, nil
	})
	data, _ := json.Marshal(map[string]any{"records": n, "last_offset": last, "end_offset": end, "values": values})
	fmt.Printf("DATA %s\n", data)
	logf("read %d records to offset %d (end %d) in %v: %v", n, last, end, time.Since(start), err)
	switch {
	case err == nil && last >= end-1:
		return nil
	case err == nil:
		return fmt.Errorf("the client stopped at offset %d, before the log end offset %d", last+1, end)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("stalled at offset %d: %d records read in %v, last offset %d, log end offset %d", last+1, n, compactedReadBound, last, end)
	}
	return fmt.Errorf("after %d records (last offset %d, log end offset %d): %w", n, last, end, err)
}
