package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { clientCommands = append(clientCommands, newPerfCommand) }

// newPerfCommand is the perf command group: load generators in the spirit
// of kafka-producer-perf-test, kafka-consumer-perf-test and the
// OpenMessaging Benchmark's end-to-end latency test.
func newPerfCommand() *cobra.Command {
	f := new(clientFlags)
	cmd := &cobra.Command{
		Use:   "perf",
		Short: "Measure produce, consume, end-to-end and queue performance",
		Long: `Load generators that measure a Kafka cluster (Samsa or any other) from
the client side, on franz-go:

  perf produce   records/s, MB/s and acknowledgement latency
  perf consume   records/s and MB/s reading a topic from its start
  perf e2e       end-to-end latency at a fixed rate (OpenMessaging
                 Benchmark style)
  perf queue     records/s acknowledged by N share consumers (KIP-932),
                 one by one or in batches, or by a consumer group

Each prints a progress line to standard error about once a second and, at
the end, one JSON object on a line of its own to standard output (MB is
10^6 bytes; latencies are in milliseconds).

The perf commands run Go's garbage collector at GOGC=400 unless the GOGC
environment variable says otherwise: the client allocates per record, and
on a machine it shares with the broker under test its collections would
take CPU from that broker (perf consume reads about 1.3x faster than at
Go's default of 100 on 2 cores).`,
		PersistentPreRun: func(*cobra.Command, []string) {
			if _, set := os.LookupEnv("GOGC"); !set {
				debug.SetGCPercent(perfGCPercent)
			}
		},
	}
	f.add(cmd)
	cmd.AddCommand(newPerfProduceCommand(f), newPerfConsumeCommand(f), newPerfE2ECommand(f), newPerfQueueCommand(f))
	return cmd
}

// perfGCPercent is the GOGC of the perf commands when the environment
// sets none (see the perf command's help).
const perfGCPercent = 400

// perfProducerFlags are the producer settings of perf produce and perf e2e.
type perfProducerFlags struct {
	recordSize      int
	acks            string
	compression     string
	linger          time.Duration
	batchMaxBytes   int
	bufferedBytes   int
	maxInFlight     int
	deliveryTimeout time.Duration
	partitions      int32
	replication     int16
	topicConfigs    []string
	payload         string
	partitioner     string
	perfReportFlags
}

// perfReportFlags are the progress settings of every perf command.
type perfReportFlags struct {
	quiet          bool
	reportInterval time.Duration
}

func (f *perfReportFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines; only the final JSON line")
	fl.DurationVar(&f.reportInterval, "report-interval", time.Second, "time between progress lines")
}

// perfReadFlags are the settings perf consume and perf queue share: how
// many records to read and when to give up; records and idle are the
// commands' own help for --records and for what --idle waits on.
type perfReadFlags struct {
	records int64
	idle    time.Duration
	perfReportFlags
}

func (f *perfReadFlags) add(cmd *cobra.Command, records, idle string) {
	fl := cmd.Flags()
	fl.Int64VarP(&f.records, "records", "n", 0, records)
	fl.DurationVar(&f.idle, "idle", 10*time.Second, "fail when "+idle+" for this long, more than 0")
	f.perfReportFlags.add(cmd)
}

func (f *perfProducerFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.recordSize, "record-size", 1024, "bytes of each record's value (perf e2e: at least 8, its due time)")
	fl.StringVar(&f.acks, "acks", "all", "acknowledgements to wait for: all, 1 or 0 (all uses the idempotent producer)")
	fl.StringVarP(&f.compression, "compression", "z", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	fl.DurationVar(&f.linger, "linger", 5*time.Millisecond, "wait this long for more records before sending a batch (linger.ms)")
	fl.IntVar(&f.batchMaxBytes, "batch-max-bytes", 1<<20, "largest batch in bytes (batch.size)")
	fl.IntVar(&f.bufferedBytes, "max-buffered-bytes", 64<<20, "bytes of records the client buffers before Produce blocks (buffer.memory)")
	fl.IntVar(&f.maxInFlight, "max-in-flight", 5, "produce requests in flight per broker with --acks 1 or 0 (max.in.flight.requests.per.connection); --acks all uses the idempotent producer, which keeps 5")
	fl.DurationVar(&f.deliveryTimeout, "delivery-timeout", 2*time.Minute, "fail the run when records are outstanding and none was acknowledged for this long, at least 1s (delivery.timeout.ms; zero: wait forever)")
	fl.Int32Var(&f.partitions, "partitions", 0, "create the topic with this many partitions when it does not exist (0: the topic must exist)")
	fl.Int16Var(&f.replication, "replication-factor", -1, "replication factor of a topic created by --partitions (-1: the broker's default)")
	fl.StringArrayVar(&f.topicConfigs, "topic-config", nil, "`key=value` config of a topic created by --partitions (compression.type=lz4, ...); may be repeated; needs --partitions, and only warns on standard error when the topic exists already (its configs are left as they are)")
	fl.StringVar(&f.payload, "payload", "text", "record values: text (words, like logs or JSON: 1 KB records compress about 2.7x with lz4, 3.3x with snappy, 4.5x with gzip or zstd) or random (incompressible: kgo then sends the batches uncompressed whatever -z says, since compression would not shrink them)")
	fl.StringVar(&f.partitioner, "partitioner", "sticky", "how records spread over partitions: sticky (whole batches to one partition at a time, as the Java producer since KIP-480) or round-robin (one record to each partition in turn: every partition gets rate/partitions records/s, and each produce request names many partitions)")
	f.perfReportFlags.add(cmd)
}

// options turns the producer flags into kgo options.
func (f *perfProducerFlags) options() ([]kgo.Opt, error) {
	// producerOptions names its own flags in its errors: check those
	// named differently here first.
	if f.batchMaxBytes < 512 || f.batchMaxBytes > 1<<30 {
		return nil, fmt.Errorf("--batch-max-bytes %d: want 512 to %d", f.batchMaxBytes, 1<<30)
	}
	if f.deliveryTimeout < 0 || f.deliveryTimeout > 0 && f.deliveryTimeout < time.Second {
		return nil, fmt.Errorf("--delivery-timeout %s: want zero or at least 1s", f.deliveryTimeout)
	}
	if f.partitions < 0 {
		return nil, fmt.Errorf("--partitions %d: want 0 (the topic must exist) or more", f.partitions)
	}
	if len(f.topicConfigs) > 0 && f.partitions == 0 {
		return nil, errors.New("--topic-config needs --partitions: it sets the configs of a topic the command creates")
	}
	if _, err := parseConfigs("--topic-config", f.topicConfigs); err != nil {
		return nil, err
	}
	pf := produceFlags{acks: f.acks, compression: f.compression, linger: f.linger, maxMessageBytes: f.batchMaxBytes,
		deliveryTimeout: f.deliveryTimeout, partition: -1}
	opts, err := pf.producerOptions()
	if err != nil {
		return nil, err
	}
	// producerOptions sets the Java partitioner for keyed lines; perf
	// records have no key, and kgo's sticky partitioner (the default)
	// fills whole batches one partition at a time, as the Java producer
	// does since KIP-480.
	switch f.partitioner {
	case "sticky", "": // the zero value is the default
		opts = append(opts, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	case "round-robin":
		opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	default:
		return nil, fmt.Errorf("--partitioner %q: want sticky or round-robin", f.partitioner)
	}
	if f.recordSize < 0 {
		return nil, fmt.Errorf("--record-size %d: want 0 or more", f.recordSize)
	}
	if f.bufferedBytes < f.batchMaxBytes {
		return nil, fmt.Errorf("--max-buffered-bytes %d: want at least --batch-max-bytes", f.bufferedBytes)
	}
	opts = append(opts, kgo.MaxBufferedBytes(f.bufferedBytes), kgo.MaxBufferedRecords(1<<30))
	// Without idempotence kgo sends one produce request at a time to a
	// broker unless told otherwise, where the Java producer (and so
	// kafka-producer-perf-test) keeps max.in.flight.requests.per.connection
	// = 5 whatever acks is; with idempotence (acks=all) kgo keeps 5 itself.
	// Left at 1, acks=1 measured the client's request pipeline rather than
	// the broker, slower than acks=all even against kfake's blackhole.
	if f.maxInFlight < 1 {
		return nil, fmt.Errorf("--max-in-flight %d: want at least 1", f.maxInFlight)
	}
	if f.acks != "all" && f.acks != "-1" {
		opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(f.maxInFlight))
	}
	if f.payload != "text" && f.payload != "random" {
		return nil, fmt.Errorf("--payload %q: want text or random", f.payload)
	}
	return opts, nil
}

// ensureTopic creates topic with partitions and configs (key=value) when it
// is missing; an existing topic is used as it is, with a warning on warn
// when configs were asked for. Errors: the CreateTopics error with the
// broker's error message when it has one.
func ensureTopic(ctx context.Context, cl *kgo.Client, warn io.Writer, topic string, partitions int32, replication int16, configs []string) error {
	if partitions <= 0 {
		return nil
	}
	cfg, err := parseConfigs("--topic-config", configs)
	if err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	// kadm returns the topic's error as err too.
	resp, err := adm.CreateTopic(ctx, partitions, replication, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		if len(configs) > 0 {
			fmt.Fprintf(warn, "samsa perf: warning: topic %s exists: --topic-config ignored, its configs are left as they are\n", topic)
		}
	case err != nil:
		return fmt.Errorf("creating topic %s: %w", topic, &responseError{err, resp.ErrMessage})
	}
	return nil
}

// errNoProgress is the cause of a run stopped by its watchdog.
var errNoProgress = errors.New("no acknowledgement")

// watchdog cancels a run when records are outstanding and none has been
// acknowledged or failed for limit (delivery.timeout.ms): kgo never times
// out records in flight with the idempotent producer, so a Flush waiting on
// a broker that died would otherwise block forever. Safe for concurrent
// use.
type watchdog struct {
	limit time.Duration
	base  time.Time
	// sent counts records handed to the client, done those whose promise
	// ran; last is when done last moved (or nothing was outstanding),
	// nanoseconds since base.
	sent, done, last atomic.Int64
	cancel           context.CancelCauseFunc
	stop             chan struct{}
	exited           chan struct{}
}

// startWatchdog returns ctx's child that the watchdog cancels with a cause
// wrapping errNoProgress; limit <= 0 means no watchdog. Stop it with close.
func startWatchdog(ctx context.Context, limit time.Duration) (*watchdog, context.Context) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{limit: limit, base: time.Now(), cancel: cancel, stop: make(chan struct{}), exited: make(chan struct{})}
	if limit <= 0 {
		close(w.exited)
		return w, ctx
	}
	go func() {
		defer close(w.exited)
		t := time.NewTicker(min(max(limit/10, time.Millisecond), time.Second))
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := int64(time.Since(w.base))
			out := w.sent.Load() - w.done.Load()
			if out <= 0 {
				w.last.Store(now)
				continue
			}
			if idle := time.Duration(now - w.last.Load()); idle >= limit {
				cancel(fmt.Errorf("%w for %s (--delivery-timeout) with %d records outstanding", errNoProgress, limit, out))
				return
			}
		}
	}()
	return w, ctx
}

// produced counts a record handed to the client.
func (w *watchdog) produced() { w.sent.Add(1) }

// acked counts a record whose promise ran, with or without an error.
func (w *watchdog) acked() {
	w.done.Add(1)
	w.last.Store(int64(time.Since(w.base)))
}

// close stops the watchdog and cancels its context.
func (w *watchdog) close() {
	close(w.stop)
	<-w.exited
	w.cancel(nil)
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// waitForLeaders waits, up to limit, until every partition of topic has a
// leader, so that a measurement started next does not count a new topic's
// leader elections (a producer that finds no leader backs off before it
// retries). It returns nil when the limit passes: the producer then waits
// as it would have. Errors: ctx's.
func waitForLeaders(ctx context.Context, cl *kgo.Client, topic string, limit time.Duration) error {
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(limit)
	for {
		md, err := adm.Metadata(ctx, topic)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil && topicReady(md.Topics[topic]) || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func topicReady(t kadm.TopicDetail) bool {
	if t.Err != nil || len(t.Partitions) == 0 {
		return false
	}
	for _, p := range t.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

// payloadPool is the bytes record values are cut from: words separated by
// spaces (text) or random bytes, 1 MiB plus one value, so that values
// differ from one another without being generated per record.
type payloadPool struct {
	buf  []byte
	size int
}

var payloadWords = []string{
	"the", "broker", "appends", "record", "batches", "to", "segment", "files", "and", "consumers",
	"fetch", "them", "from", "page", "cache", "with", "zero", "copy", "offset", "partition",
	"leader", "epoch", "high", "watermark", "timestamp", "\"key\":", "\"value\":", "{", "}", "null",
	"12345", "67890", "true", "false", "user", "order", "event", "created", "updated", "deleted",
}

func newPayloadPool(kind string, size int) *payloadPool {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 1<<20 + size
	buf := make([]byte, 0, n+16)
	if kind == "random" {
		buf = buf[:n]
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
	} else {
		for len(buf) < n {
			buf = append(buf, payloadWords[rng.IntN(len(payloadWords))]...)
			buf = append(buf, ' ')
		}
		buf = buf[:n]
	}
	return &payloadPool{buf: buf, size: size}
}

// value returns the i-th value; it aliases the pool and must not be
// modified.
func (p *payloadPool) value(i int64) []byte {
	at := int((uint64(i) * 7919) % uint64(len(p.buf)-p.size))
	return p.buf[at : at+p.size : at+p.size]
}

// latencies collects latency samples and summarizes them exactly (sorted
// at the end); a run of 10^6 records keeps 8 MB of samples.
type latencies struct {
	samples []time.Duration
}

// latencySummary is the JSON form of a latency distribution, milliseconds.
type latencySummary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// summary sorts the samples and returns their distribution, nil when there
// are none. Percentiles are nearest-rank.
func (l *latencies) summary() *latencySummary {
	if len(l.samples) == 0 {
		return nil
	}
	slices.Sort(l.samples)
	var sum time.Duration
	for _, s := range l.samples {
		sum += s
	}
	n := len(l.samples)
	at := func(q float64) float64 {
		i := int(q*float64(n)+0.999999) - 1
		return ms(l.samples[min(max(i, 0), n-1)])
	}
	return &latencySummary{
		Count: int64(n),
		Mean:  ms(sum / time.Duration(n)),
		P50:   at(0.50),
		P90:   at(0.90),
		P99:   at(0.99),
		P999:  at(0.999),
		Max:   ms(l.samples[n-1]),
	}
}

// meter counts records and latencies from client callbacks and prints a
// progress line for each interval. Safe for concurrent use.
type meter struct {
	w     io.Writer
	name  string
	start time.Time

	mu      sync.Mutex // guards the fields below and writes to w
	records int64
	bytes   int64
	errors  int64
	lat     latencies
	// The current interval.
	iRecords, iBytes int64
	iLatSum, iLatMax time.Duration
	iLat             int64
	iStart           time.Time

	stop chan struct{}
	done chan struct{}
}

// startMeter starts the progress goroutine (none when quiet or interval is
// not positive); stop it with finish.
func startMeter(w io.Writer, name string, interval time.Duration, quiet bool) *meter {
	now := time.Now()
	m := &meter{w: w, name: name, start: now, iStart: now, stop: make(chan struct{}), done: make(chan struct{})}
	if quiet || interval <= 0 {
		close(m.done)
		return m
	}
	go func() {
		defer close(m.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.report()
			}
		}
	}()
	return m
}

// restart sets the start of the measurement to now (after a warm-up or a
// setup phase).
func (m *meter) restart() {
	m.mu.Lock()
	m.start, m.iStart = time.Now(), time.Now()
	m.mu.Unlock()
}

// add counts one record of size bytes; lat < 0 records no latency.
func (m *meter) add(size int, lat time.Duration) {
	m.mu.Lock()
	m.records++
	m.bytes += int64(size)
	m.iRecords++
	m.iBytes += int64(size)
	if lat >= 0 {
		m.lat.samples = append(m.lat.samples, lat)
		m.iLat++
		m.iLatSum += lat
		m.iLatMax = max(m.iLatMax, lat)
	}
	m.mu.Unlock()
}

// addMany counts n records of size bytes in all, without latencies.
func (m *meter) addMany(n, size int64) {
	m.mu.Lock()
	m.records += n
	m.bytes += size
	m.iRecords += n
	m.iBytes += size
	m.mu.Unlock()
}

// fail counts a failed record.
func (m *meter) fail() {
	m.mu.Lock()
	m.errors++
	m.mu.Unlock()
}

func (m *meter) count() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.records
}

func (m *meter) report() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	el := max(now.Sub(m.iStart).Seconds(), 1e-9)
	line := fmt.Sprintf("samsa perf %s: %d records, %.1f records/s, %.2f MB/s", m.name, m.records,
		float64(m.iRecords)/el, float64(m.iBytes)/1e6/el)
	if m.iLat > 0 {
		line += fmt.Sprintf(", latency avg %.2f ms max %.2f ms", ms(m.iLatSum/time.Duration(m.iLat)), ms(m.iLatMax))
	}
	if m.errors > 0 {
		line += fmt.Sprintf(", %d errors", m.errors)
	}
	fmt.Fprintln(m.w, line)
	m.iRecords, m.iBytes, m.iLat, m.iLatSum, m.iLatMax, m.iStart = 0, 0, 0, 0, 0, now
}

// finish stops the progress goroutine and returns the totals, measured up
// to end.
func (m *meter) finish(end time.Time) perfResult {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	secs := max(end.Sub(m.start).Seconds(), 1e-9)
	return perfResult{
		Tool:          m.name,
		Records:       m.records,
		Bytes:         m.bytes,
		Errors:        m.errors,
		Seconds:       secs,
		RecordsPerSec: float64(m.records) / secs,
		MBPerSec:      float64(m.bytes) / 1e6 / secs,
		Latency:       m.lat.summary(),
	}
}

// perfResult is the final line of a perf command.
type perfResult struct {
	Tool          string  `json:"tool"`
	Topic         string  `json:"topic"`
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Errors        int64   `json:"errors"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	// Latency is the acknowledgement latency (produce) or the end-to-end
	// latency from the time each record was due (e2e).
	Latency *latencySummary `json:"latency_ms,omitempty"`
	// PublishLatency (e2e) is from the due time to the acknowledgement.
	PublishLatency *latencySummary `json:"publish_latency_ms,omitempty"`
	// FirstRecordMs (consume) is the time to the first record.
	FirstRecordMs *float64 `json:"first_record_ms,omitempty"`
	// TargetRate and MaxSendDelayMs (e2e): the rate asked for and how
	// far behind its schedule the generator fell at worst.
	TargetRate     float64  `json:"target_rate,omitempty"`
	MaxSendDelayMs *float64 `json:"max_send_delay_ms,omitempty"`
	Settings       any      `json:"settings,omitempty"`
}

// write prints r as one JSON line to w and, unless quiet, a summary line to
// log.
func (r *perfResult) write(w, log io.Writer, quiet bool) error {
	if !quiet {
		s := fmt.Sprintf("samsa perf %s: done: %d records in %.2fs, %.1f records/s, %.2f MB/s", r.Tool, r.Records,
			r.Seconds, r.RecordsPerSec, r.MBPerSec)
		if l := r.Latency; l != nil {
			s += fmt.Sprintf(", latency ms p50 %.2f p99 %.2f p99.9 %.2f max %.2f", l.P50, l.P99, l.P999, l.Max)
		}
		if r.Errors > 0 {
			s += fmt.Sprintf(", %d errors", r.Errors)
		}
		fmt.Fprintln(log, s)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
