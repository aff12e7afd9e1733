package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/cli/jsonkey"
)

func init() { clientCommands = append(clientCommands, newProduceCommand) }

// Defaults of samsa produce.
const (
	// defaultMaxMessageBytes is Kafka's message.max.bytes default, the
	// largest batch a broker takes unless the topic's max.message.bytes
	// says otherwise.
	defaultMaxMessageBytes = 1048588
	// javaBatchSize is the Java producer's batch.size default: the bytes
	// after which its partitioner moves records without a key to another
	// partition (KIP-794).
	javaBatchSize = 16384
	// arenaSize is the size of the blocks that line copies are cut from.
	arenaSize = 4 << 20
)

type produceFlags struct {
	clientFlags
	keyField        string
	keySeparator    string
	partition       int32
	acks            string
	compression     string
	linger          time.Duration
	headers         []string
	maxMessageBytes int
	deliveryTimeout time.Duration
	quiet           bool
}

func newProduceCommand() *cobra.Command {
	f := new(produceFlags)
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce records read from standard input, one per line",
		Long: `Produce one record per line of standard input to TOPIC, then wait until
every record is acknowledged.

A line ends at "\n", which is not part of the record; everything else,
including a "\r" before it and empty lines, is kept byte for byte. A line
may be up to --max-message-bytes long.

Keys:
  (default)            no key
  --key-field FIELD    each line is a JSON object; the key is the value of
                       its top-level FIELD: a string's contents, or the JSON
                       text of a number, boolean, object or array. A line
                       without FIELD, or with FIELD null, gets no key (they
                       are counted in the summary). The record value is the
                       whole line, unchanged.
  --key-separator SEP  the key is the text before the first SEP and the
                       value the text after it; a line without SEP is an
                       error, as in kafka-console-producer.

Partitions: records with a key go to murmur2(key) & 0x7fffffff % partitions,
as the Java client's default partitioner does; records without a key stick
to one partition for 16 KiB, then move on (KIP-794). --partition sends every
record to one partition.

Delivery: --acks all (the default) uses the idempotent producer; --acks 1
and --acks 0 turn idempotence off. Before reading standard input the
command checks that a broker answers, and exits non-zero at once, saying
why (connection refused, no answer within 5s), when none does; a broker
that cannot be reached later is reported at most every 5 seconds while
records are retried. The command exits non-zero when any record failed or
when standard input cannot be read to the end.

A progress line goes to standard error about once a second, and a summary
at the end, unless --quiet.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runProduce(cmd, f, args[0]) },
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&f.keyField, "key-field", "k", "", "take the key from this top-level field of each JSON line")
	fl.StringVarP(&f.keySeparator, "key-separator", "K", "", "split each line into key and value at the first `SEP`")
	fl.Int32VarP(&f.partition, "partition", "p", -1, "produce every record to this partition (-1: use the partitioner)")
	fl.StringVar(&f.acks, "acks", "all", "acknowledgements to wait for: all, 1 or 0")
	fl.StringVarP(&f.compression, "compression", "z", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	fl.DurationVar(&f.linger, "linger", 5*time.Millisecond, "wait this long for more records before sending a batch (linger.ms)")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, "add header `key=value` to every record; may be repeated")
	fl.IntVar(&f.maxMessageBytes, "max-message-bytes", defaultMaxMessageBytes, "largest line and largest batch, in bytes")
	fl.DurationVar(&f.deliveryTimeout, "delivery-timeout", 2*time.Minute, "fail a record not acknowledged this long after it was read, at least 1s (delivery.timeout.ms; zero: never)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress or summary on standard error")
	cmd.MarkFlagsMutuallyExclusive("key-field", "key-separator")
	return cmd
}

// producerOptions turns the flags into kgo options.
func (f *produceFlags) producerOptions() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch f.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, fmt.Errorf("--acks %q: want all, 1 or 0", f.acks)
	}
	var codec kgo.CompressionCodec
	switch f.compression {
	case "none":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("--compression %q: want none, gzip, snappy, lz4 or zstd", f.compression)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	if f.linger < 0 {
		return nil, fmt.Errorf("--linger %s: must not be negative", f.linger)
	}
	opts = append(opts, kgo.ProducerLinger(f.linger))
	if f.deliveryTimeout < 0 || f.deliveryTimeout > 0 && f.deliveryTimeout < time.Second {
		return nil, fmt.Errorf("--delivery-timeout %s: want zero or at least 1s", f.deliveryTimeout)
	}
	opts = append(opts, kgo.RecordDeliveryTimeout(f.deliveryTimeout))
	// kgo refuses batches limits under 512 bytes.
	if f.maxMessageBytes < 512 || f.maxMessageBytes > 1<<30 {
		return nil, fmt.Errorf("--max-message-bytes %d: want 512 to %d", f.maxMessageBytes, 1<<30)
	}
	opts = append(opts, kgo.ProducerBatchMaxBytes(int32(f.maxMessageBytes)))
	if f.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	} else {
		// nil hasher: murmur2, masked to 31 bits, modulo the partition
		// count, as org.apache.kafka.clients.producer.internals.BuiltInPartitioner.
		opts = append(opts, kgo.RecordPartitioner(kgo.UniformBytesPartitioner(javaBatchSize, true, true, nil)))
	}
	return opts, nil
}

// parseHeaders turns key=value arguments into record headers.
func parseHeaders(kvs []string) ([]kgo.RecordHeader, error) {
	var hs []kgo.RecordHeader
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--header %q: want key=value", kv)
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return hs, nil
}

func runProduce(cmd *cobra.Command, f *produceFlags, topic string) error {
	opts, err := f.producerOptions()
	if err != nil {
		return err
	}
	headers, err := parseHeaders(f.headers)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	// A missing topic is created when the broker allows it
	// (auto.create.topics.enable), as with Kafka's console producer.
	warn := &connectWarner{quiet: f.quiet}
	cl, err := f.newClient(cmd, append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.WithHooks(warn))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// No broker answering is said at once, not after each record has
	// been retried for --delivery-timeout.
	if err := ping(ctx, cl, f.seeds(cmd)); err != nil {
		return err
	}

	prog := startProgress(cmd.ErrOrStderr(), "produce", "acked", time.Second, f.quiet)
	warn.logf = prog.logf
	warn.armed.Store(true)
	var (
		mu       sync.Mutex // guards firstErr
		firstErr error
		sent     int64
		keyless  int64
		lineNo   int64
		readErr  error
		lineBuf  []byte
		arena    []byte
		splitter = []byte(f.keySeparator)
		promise  = func(r *kgo.Record, err error) {
			if err != nil {
				prog.fail()
				mu.Lock()
				if firstErr == nil {
					firstErr = err
					if r.Partition >= 0 {
						firstErr = fmt.Errorf("partition %d: %w", r.Partition, err)
					}
				}
				mu.Unlock()
				return
			}
			prog.add(1, int64(len(r.Key)+len(r.Value)))
		}
	)
	in := bufio.NewReaderSize(cmd.InOrStdin(), 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			readErr = err
			break
		}
		var line []byte
		line, lineBuf, readErr = readLine(in, f.maxMessageBytes, lineBuf)
		if readErr != nil {
			if errors.Is(readErr, io.EOF) {
				readErr = nil
			}
			break
		}
		lineNo++
		// The record owns its bytes until it is acknowledged: copy the
		// line out of the reader's buffer into a block shared by many.
		if len(line) > cap(arena)-len(arena) {
			arena = make([]byte, 0, max(arenaSize, len(line)))
		}
		start := len(arena)
		arena = append(arena, line...)
		line = arena[start:len(arena):len(arena)]

		r := &kgo.Record{Value: line, Headers: headers, Partition: f.partition}
		switch {
		case f.keyField != "":
			key, ok, err := jsonkey.Field(line, f.keyField)
			if err != nil {
				readErr = fmt.Errorf("line %d: --key-field %s: %w", lineNo, f.keyField, err)
			} else if !ok {
				keyless++
			}
			r.Key = key
		case f.keySeparator != "":
			k, v, ok := bytes.Cut(line, splitter)
			if !ok {
				readErr = fmt.Errorf("line %d: no key separator %q", lineNo, f.keySeparator)
			}
			r.Key, r.Value = k, v
		}
		if readErr != nil {
			break
		}
		sent++
		cl.Produce(ctx, r, promise)
	}
	flushErr := cl.Flush(ctx)
	prog.finish(f.quiet)
	acked, _, failed := prog.counts()
	if keyless > 0 && !f.quiet {
		fmt.Fprintf(cmd.ErrOrStderr(), "samsa produce: %d records had no %q field and were sent without a key\n", keyless, f.keyField)
	}
	var errs []error
	if readErr != nil {
		errs = append(errs, fmt.Errorf("reading standard input: %w", readErr))
	}
	mu.Lock()
	if failed > 0 {
		errs = append(errs, fmt.Errorf("%d of %d records failed; first error: %w", failed, sent, firstErr))
	}
	mu.Unlock()
	if flushErr != nil {
		errs = append(errs, fmt.Errorf("%d of %d records acknowledged: %w", acked, sent, flushErr))
	}
	return errors.Join(errs...)
}

// pingTimeout bounds the check that a broker answers before producing.
const pingTimeout = 5 * time.Second

// ping checks that one of the brokers answers an ApiVersions request
// within pingTimeout, and otherwise says why (the last dial or request
// error).
func ping(ctx context.Context, cl *kgo.Client, seeds []string) error {
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	err := cl.Ping(pctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no broker of %s answered within %v", strings.Join(seeds, ","), pingTimeout)
	}
	return fmt.Errorf("cannot reach a broker of %s: %w", strings.Join(seeds, ","), err)
}

// connectWarner is a kgo hook that reports a failed connection to a broker
// with logf, at most once per connectWarnInterval, once armed: the
// progress line alone ("0 records acked") looks like a hang while records
// are retried.
type connectWarner struct {
	quiet bool
	logf  func(format string, args ...any) // set before armed
	armed atomic.Bool

	mu   sync.Mutex // guards last
	last time.Time
}

const connectWarnInterval = 5 * time.Second

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (c *connectWarner) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil || c.quiet || !c.armed.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); now.Sub(c.last) >= connectWarnInterval {
		c.last = now
		c.logf("samsa produce: cannot connect to broker %d at %s: %v (retrying until --delivery-timeout)\n", meta.NodeID, net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port))), err)
	}
}

// errLineTooLong is returned by readLine for a line above the limit.
var errLineTooLong = errors.New("line longer than --max-message-bytes")

// readLine reads the next line from r without its "\n", which may be
// missing on the last line. The returned line aliases buf (returned for
// reuse) or r's buffer and is valid until the next call. It returns io.EOF
// at the end of input and errLineTooLong for a line of more than limit
// bytes.
func readLine(r *bufio.Reader, limit int, buf []byte) (line, newBuf []byte, err error) {
	frag, err := r.ReadSlice('\n')
	if err == nil {
		if len(frag)-1 > limit {
			return nil, buf, errLineTooLong
		}
		return frag[:len(frag)-1], buf, nil
	}
	buf = append(buf[:0], frag...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(buf) > limit+1 {
			return nil, buf, errLineTooLong
		}
		frag, err = r.ReadSlice('\n')
		buf = append(buf, frag...)
	}
	switch {
	case err == nil:
		buf = buf[:len(buf)-1]
	case errors.Is(err, io.EOF):
		if len(buf) == 0 {
			return nil, buf, io.EOF
		}
	default:
		return nil, buf, err
	}
	if len(buf) > limit {
		return nil, buf, errLineTooLong
	}
	return buf, buf, nil
}
