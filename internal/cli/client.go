package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of the flags shared by the client commands.
const (
	// defaultBrokers is the bootstrap list when neither --brokers nor
	// SAMSA_BROKERS is set: the default Kafka listener of `samsa server`.
	defaultBrokers = "localhost:9092"
	// brokersEnv names the environment variable that replaces the default
	// of --brokers.
	brokersEnv = "SAMSA_BROKERS"
)

// clientFlags are the connection flags of every client command.
type clientFlags struct {
	brokers       string
	commandConfig string // --command-config: client security properties
}

// add registers --brokers on cmd's persistent flags, so that the
// subcommands of a command group inherit it.
func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVarP(&f.brokers, "brokers", "b", defaultBrokers,
		"comma-separated bootstrap brokers, host:port (environment "+brokersEnv+" replaces the default)")
	cmd.PersistentFlags().StringVar(&f.commandConfig, "command-config", "",
		"client properties file for secured clusters: security.protocol, sasl.mechanism, sasl.username, sasl.password or sasl.jaas.config, ssl.truststore.location, ssl.keystore.location (PEM); see docs/security.md")
}

// seeds returns the bootstrap brokers: the --brokers flag when given, else
// $SAMSA_BROKERS when set, else localhost:9092.
func (f *clientFlags) seeds(cmd *cobra.Command) []string {
	list := f.brokers
	if fl := cmd.Flags().Lookup("brokers"); fl == nil || !fl.Changed {
		if env := strings.TrimSpace(os.Getenv(brokersEnv)); env != "" {
			list = env
		}
	}
	var seeds []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// adminFlags are the flags of the admin command groups (topic, group,
// txn): the connection flags and --timeout.
type adminFlags struct {
	clientFlags
	timeout time.Duration
}

// addWithTimeout registers --brokers and --timeout (default 30 s) on cmd's
// persistent flags.
func (f *adminFlags) addWithTimeout(cmd *cobra.Command) {
	f.add(cmd)
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 30*time.Second,
		"give up after this long (zero or negative: no limit)")
}

// context returns cmd's context bounded by --timeout.
func (f *adminFlags) context(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	if f.timeout <= 0 {
		return context.WithCancel(cmd.Context())
	}
	return context.WithTimeout(cmd.Context(), f.timeout)
}

// newClient creates a kgo client for the seed brokers with the extra options.
func (f *clientFlags) newClient(cmd *cobra.Command, opts ...kgo.Opt) (*kgo.Client, error) {
	seeds := f.seeds(cmd)
	if len(seeds) == 0 {
		return nil, errors.New("no brokers: set --brokers or " + brokersEnv)
	}
	all := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("samsa-cli")}
	if f.commandConfig != "" {
		sec, err := commandConfig(f.commandConfig)
		if err != nil {
			return nil, err
		}
		all = append(all, sec...)
	}
	all = append(all, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return cl, nil
}

// newAdmin creates a kadm client; closing it closes the kgo client under it.
func (f *clientFlags) newAdmin(cmd *cobra.Command) (*kadm.Client, error) {
	cl, err := f.newClient(cmd)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// kafkaError formats err from a Kafka response, Kafka's error name first:
// "NAME: the broker's message" when the response carried an error message
// (CreateTopics v1+, AlterConfigs, ...), else kerr's "NAME: description",
// the generic text of the code, which can contradict the broker's reason
// (INVALID_PARTITIONS says "Number of partitions is below 1." for a count
// above log.partitions.max). An err that is not a Kafka error code (a
// network error) keeps its text, followed by msg in parentheses.
func kafkaError(err error, msg string) string {
	var ke *kerr.Error
	if msg != "" && errors.As(err, &ke) && err.Error() == ke.Error() {
		return ke.Message + ": " + msg
	}
	s := err.Error()
	if msg != "" && !strings.Contains(s, msg) {
		s += " (" + msg + ")"
	}
	return s
}

// responseError is a Kafka error code from a response with the broker's
// error message: it prints as kafkaError and unwraps to the code's
// *kerr.Error for errors.Is.
type responseError struct {
	err error
	msg string
}

func (e *responseError) Error() string { return kafkaError(e.err, e.msg) }
func (e *responseError) Unwrap() error { return e.err }

// codeError formats a response's error code and message as kafkaError.
func codeError(code int16, msg *string) string {
	m := ""
	if msg != nil {
		m = *msg
	}
	return kafkaError(kerr.ErrorForCode(code), m)
}

// progress writes a status line to w about once a second while a long
// command runs, then a final summary line. The zero value is not usable;
// use startProgress.
type progress struct {
	w     io.Writer
	verb  string // "produce" or "consume"
	noun  string // what the records count: "acked", "consumed"
	start time.Time

	mu      sync.Mutex // guards the counters below, note and writes to w
	note    string     // replaces the counters in the status line when set
	records int64
	bytes   int64
	failed  int64

	stop chan struct{}
	done chan struct{}
}

// startProgress starts the goroutine that reports every interval; quiet
// starts none. Call finish to stop it.
func startProgress(w io.Writer, verb, noun string, interval time.Duration, quiet bool) *progress {
	p := &progress{w: w, verb: verb, noun: noun, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if quiet {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.mu.Lock()
				if p.note != "" {
					fmt.Fprintf(p.w, "samsa %s: %s (%s)\n", p.verb, p.note, time.Since(p.start).Round(time.Second))
				} else {
					fmt.Fprintf(p.w, "samsa %s: %s\n", p.verb, p.statusLocked())
				}
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// add counts n records of size bytes in all.
func (p *progress) add(n, size int64) {
	p.mu.Lock()
	p.records += n
	p.bytes += size
	p.mu.Unlock()
}

// setNote makes the periodic line say note instead of the counters (a
// consumer waiting to join its group has none to show); "" shows them
// again.
func (p *progress) setNote(note string) {
	p.mu.Lock()
	p.note = note
	p.mu.Unlock()
}

// logf writes a line to the progress writer without interleaving with the
// progress lines.
func (p *progress) logf(format string, args ...any) {
	p.mu.Lock()
	fmt.Fprintf(p.w, format, args...)
	p.mu.Unlock()
}

// fail counts a failed record.
func (p *progress) fail() {
	p.mu.Lock()
	p.failed++
	p.mu.Unlock()
}

// counts returns the records, bytes and failures counted so far.
func (p *progress) counts() (records, bytes, failed int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.records, p.bytes, p.failed
}

func (p *progress) statusLocked() string {
	el := time.Since(p.start)
	s := fmt.Sprintf("%d records %s, %.1f MB in %s, %.2f MB/s", p.records, p.noun, float64(p.bytes)/1e6,
		el.Round(time.Millisecond), float64(p.bytes)/1e6/max(el.Seconds(), 1e-9))
	if p.failed > 0 {
		s += fmt.Sprintf(", %d failed", p.failed)
	}
	return s
}

// finish stops the reporting goroutine and, unless quiet, writes the
// summary line.
func (p *progress) finish(quiet bool) {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	if !quiet {
		p.mu.Lock()
		fmt.Fprintf(p.w, "samsa %s: done: %s\n", p.verb, p.statusLocked())
		p.mu.Unlock()
	}
}
