package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsClient is the JetStream load generator, printing the same final JSON
// line as samsa perf: `bench nats-client produce|consume|e2e -url U ...`.
func natsClient(args []string) error {
	if len(args) == 0 {
		return errors.New("nats-client: produce, consume or e2e")
	}
	mode := args[0]
	fs := flag.NewFlagSet("nats-client", flag.ExitOnError)
	url := fs.String("url", "", "server URL")
	records := fs.Int("records", 1_000_000, "records to publish or read (produce, consume)")
	size := fs.Int("record-size", 1024, "bytes of each message")
	subjects := fs.Int("subjects", 8, "subjects the stream spreads messages over (bench.0 …)")
	pending := fs.Int("max-pending", 4096, "async publishes in flight at most")
	rate := fs.Float64("rate", 20000, "messages per second (e2e)")
	duration := fs.Duration("duration", 30*time.Second, "how long to publish after the warm-up (e2e)")
	warmup := fs.Duration("warmup", 0, "publish this long first without counting (e2e)")
	fs.Parse(args[1:])

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nc, err := nats.Connect(*url)
	if err != nil {
		return err
	}
	defer nc.Close()

	var (
		mu       sync.Mutex
		pubLat   []time.Duration
		acked    atomic.Int64
		failed   atomic.Int64
		sendTime []int64      // by stream sequence - 1 (produce)
		e2eFrom  atomic.Int64 // e2e: acks of messages due before are warm-up
	)
	ackHandler := func(_ jetstream.JetStream, m *nats.Msg, ack *jetstream.PubAck) {
		now := time.Now().UnixNano()
		var sent int64
		if mode == "e2e" {
			sent = int64(binary.BigEndian.Uint64(m.Data))
			if sent < e2eFrom.Load() {
				return
			}
		} else if ack != nil && ack.Sequence >= 1 && ack.Sequence <= uint64(len(sendTime)) {
			sent = sendTime[ack.Sequence-1]
		}
		mu.Lock()
		if sent > 0 {
			pubLat = append(pubLat, time.Duration(now-sent))
		}
		mu.Unlock()
		acked.Add(1)
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(*pending),
		jetstream.WithPublishAsyncAckHandler(ackHandler),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
	if err != nil {
		return err
	}
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:     "BENCH",
		Subjects: []string{"bench.>"},
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		return err
	}
	subj := make([]string, *subjects)
	for i := range subj {
		subj[i] = fmt.Sprintf("bench.%d", i)
	}
	pool := textPool(*size)
	value := func(i int) []byte {
		at := (i * 7919) % (len(pool) - *size)
		return pool[at : at+*size]
	}
	res := map[string]any{"tool": mode}

	switch mode {
	case "produce":
		sendTime = make([]int64, *records)
		start := time.Now()
		for i := 0; i < *records; i++ {
			sendTime[i] = time.Now().UnixNano()
			if _, err := js.PublishAsync(subj[i%len(subj)], value(i)); err != nil {
				return err
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		}
		secs := time.Since(start).Seconds()
		n := acked.Load()
		res["records"], res["errors"], res["seconds"] = n, failed.Load(), secs
		res["records_per_sec"] = float64(n) / secs
		res["mb_per_sec"] = float64(n) * float64(*size) / 1e6 / secs
		mu.Lock()
		res["latency_ms"] = summarize(pubLat)
		mu.Unlock()

	case "consume":
		info, err := stream.Info(ctx)
		if err != nil {
			return err
		}
		want := min(int64(*records), int64(info.State.Msgs))
		start := time.Now()
		cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		var got, bytes atomic.Int64
		done := make(chan struct{})
		cc, err := cons.Consume(func(m jetstream.Msg) {
			bytes.Add(int64(len(m.Data())))
			if got.Add(1) == want {
				close(done)
			}
		}, jetstream.PullMaxBytes(8<<20))
		if err != nil {
			return err
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		secs := time.Since(start).Seconds()
		cc.Stop()
		res["records"], res["bytes"], res["seconds"] = got.Load(), bytes.Load(), secs
		res["records_per_sec"] = float64(got.Load()) / secs
		res["mb_per_sec"] = float64(bytes.Load()) / 1e6 / secs

	case "e2e":
		cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			return err
		}
		var e2eMu sync.Mutex
		var e2eLat []time.Duration
		var got atomic.Int64
		start := time.Now()
		countFrom := start.Add(*warmup).UnixNano()
		e2eFrom.Store(countFrom)
		cc, err := cons.Consume(func(m jetstream.Msg) {
			now := time.Now().UnixNano()
			d := m.Data()
			if len(d) < 8 {
				return
			}
			due := int64(binary.BigEndian.Uint64(d))
			if due < countFrom {
				return
			}
			e2eMu.Lock()
			e2eLat = append(e2eLat, time.Duration(now-due))
			e2eMu.Unlock()
			got.Add(1)
		})
		if err != nil {
			return err
		}
		// The same fixed schedule as samsa perf e2e.
		end := start.Add(*warmup + *duration)
		interval := time.Duration(float64(time.Second) / *rate)
		var sent int
		var maxDelay time.Duration
		for {
			now := time.Now()
			for {
				due := start.Add(time.Duration(sent) * interval)
				if due.After(now) || !due.Before(end) {
					break
				}
				if due.UnixNano() >= countFrom {
					maxDelay = max(maxDelay, now.Sub(due))
				}
				v := make([]byte, *size)
				copy(v, value(sent))
				binary.BigEndian.PutUint64(v, uint64(due.UnixNano()))
				if _, err := js.PublishAsync(subj[sent%len(subj)], v); err != nil {
					return err
				}
				sent++
			}
			next := start.Add(time.Duration(sent) * interval)
			if !next.Before(end) {
				break
			}
			time.Sleep(time.Until(next))
		}
		<-js.PublishAsyncComplete()
		deadline := time.Now().Add(10 * time.Second)
		for got.Load() < acked.Load() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cc.Stop()
		secs := duration.Seconds()
		n := got.Load()
		res["records"], res["errors"], res["seconds"], res["target_rate"] = n, failed.Load(), secs, *rate
		res["records_per_sec"] = float64(n) / secs
		res["mb_per_sec"] = float64(n) * float64(*size) / 1e6 / secs
		res["max_send_delay_ms"] = float64(maxDelay) / 1e6
		e2eMu.Lock()
		res["latency_ms"] = summarize(e2eLat)
		e2eMu.Unlock()
		mu.Lock()
		res["publish_latency_ms"] = summarize(pubLat)
		mu.Unlock()
		if n < acked.Load() {
			return fmt.Errorf("%d of %d acknowledged messages arrived", n, acked.Load())
		}
	default:
		return fmt.Errorf("nats-client: unknown mode %q", mode)
	}
	b, _ := json.Marshal(res)
	fmt.Fprintf(os.Stdout, "%s\n", b)
	return nil
}

// summarize is the latency distribution in milliseconds, as samsa perf
// prints it.
func summarize(s []time.Duration) map[string]float64 {
	if len(s) == 0 {
		return nil
	}
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.999999) - 1
		return float64(s[min(max(i, 0), len(s)-1)]) / 1e6
	}
	return map[string]float64{"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "p99_9": at(0.999), "max": at(1)}
}

// textPool is 1 MiB of words plus one value, as samsa perf's text payload.
func textPool(size int) []byte {
	words := []string{"the", "broker", "appends", "record", "batches", "to", "segment", "files", "and", "consumers",
		"fetch", "them", "from", "page", "cache", "with", "zero", "copy", "offset", "partition",
		"leader", "epoch", "high", "watermark", "timestamp", "\"key\":", "\"value\":", "{", "}", "null",
		"12345", "67890", "true", "false", "user", "order", "event", "created", "updated", "deleted"}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 1<<20 + size
	buf := make([]byte, 0, n+16)
	for len(buf) < n {
		buf = append(buf, words[rng.IntN(len(words))]...)
		buf = append(buf, ' ')
	}
	return buf[:n]
}
