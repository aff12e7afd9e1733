// Command goclients is the conformance runner for the Go clients (franz-go,
// IBM/sarama, segmentio/kafka-go, confluent-kafka-go) and for kcat, which
// it drives as a process. See the conformance package doc for its flags
// and the RESULT line it prints.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Keep in step with conformance.ProduceCount, SecureCount and
// TimestampBase.
const (
	produceCount        = 10000
	secureCount         = 1000
	timestampBase int64 = 1700000000000
)

type header struct{ Key, Value string }

// record is a client-neutral record.
type record struct {
	Key, Value []byte
	Headers    []header
	Partition  int32
	Offset     int64
}

// na is returned by a client for a feature it does not have.
type na struct{ reason string }

func (e na) Error() string { return e.reason }

// client is what each Go client (and kcat) implements; the scenarios
// below are written once against it.
type client interface {
	version() string
	// metadata returns the number of brokers and, per partition of topic,
	// its leader (-1 when none).
	metadata(ctx context.Context, topic string) (brokers int, leaders []int32, err error)
	createTopic(ctx context.Context, topic string, partitions int32) error
	// produce writes recs to recs[i].Partition with codec ("none", "gzip",
	// "snappy", "lz4", "zstd"), waiting for every acknowledgement.
	produce(ctx context.Context, topic, codec string, recs []record, idempotent bool) error
	// consume reads the first n records of partition from the earliest
	// offset, without a group.
	consume(ctx context.Context, topic string, partition int32, n int, readCommitted bool) ([]record, error)
	// consumeFrom reads partition from the earliest offset, without a
	// group, and calls fn with each record (Value nil for a null value)
	// until fn returns stop or an error; it returns fn's error, or ctx's
	// when ctx ends first.
	consumeFrom(ctx context.Context, topic string, partition int32, fn func(record) (stop bool, err error)) error
	// offsetForTime is ListOffsets: the first offset with a timestamp at
	// or after ts, or the earliest (ts -2) or latest (ts -1) offset.
	offsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error)
	describeConfigs(ctx context.Context, topic string) (map[string]string, error)
	alterConfig(ctx context.Context, topic, key, value string) error
	deleteTopic(ctx context.Context, topic string) error
	newMember(ctx context.Context, topic, group string) (member, error)
	newTxnProducer(ctx context.Context, topic, txnID string) (txnProducer, error)
	close()
}

// member is one consumer of a group subscribed to one topic.
type member interface {
	// poll returns the records received since the last poll, waiting up
	// to d for some.
	poll(ctx context.Context, d time.Duration) ([]record, error)
	// commit synchronously commits the offsets after every record that
	// poll returned.
	commit(ctx context.Context) error
	close() error
}

type txnProducer interface {
	begin() error
	produce(ctx context.Context, recs []record) error
	commit(ctx context.Context) error
	abort(ctx context.Context) error
	close()
}

// notes are caveats reported with a pass.
var notes []string

var opts struct {
	client, scenario, bootstrap, topic, group, codec string
	groups                                           bool
	// kip848: the group scenario's members use the KIP-848 consumer
	// protocol (scenario group-kip848).
	kip848 bool
}

func main() {
	var groups string
	flag.StringVar(&opts.client, "client", "", "franz, sarama, kafka-go, confluent or kcat")
	flag.StringVar(&opts.scenario, "scenario", "", "scenario to run")
	flag.StringVar(&opts.bootstrap, "bootstrap", "", "bootstrap host:port")
	flag.StringVar(&opts.topic, "topic", "", "topic of the scenario")
	flag.StringVar(&opts.group, "group", "", "group of the scenario")
	flag.StringVar(&opts.codec, "codec", "none", "codec of the produce scenario")
	flag.StringVar(&groups, "groups", "0", "1 if the broker advertises the group APIs")
	secureFlags()
	flag.Parse()
	opts.groups = groups == "1"

	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	c, err := newClient(opts.client)
	if err != nil {
		result("fail", err.Error())
	}
	defer c.close()
	err = run(ctx, c)
	var n na
	switch {
	case errors.As(err, &n):
		result("na", n.reason)
	case err != nil:
		result("fail", err.Error())
	case opts.scenario == "version":
		result("pass", c.version())
	default:
		result("pass", strings.Join(notes, "; "))
	}
}

func newClient(name string) (client, error) {
	switch name {
	case "franz":
		return newFranz(opts.bootstrap)
	case "sarama":
		return newSarama(opts.bootstrap)
	case "kafka-go":
		return newKafkaGo(opts.bootstrap)
	case "confluent":
		return newConfluent(opts.bootstrap)
	case "kcat":
		return newKcat(opts.bootstrap)
	}
	return nil, fmt.Errorf("unknown client %q", name)
}

func result(status, detail string) {
	b, _ := json.Marshal(map[string]string{"status": status, "detail": detail})
	fmt.Printf("RESULT %s\n", b)
	os.Exit(0)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

func run(ctx context.Context, c client) error {
	switch opts.scenario {
	case "version":
		return nil
	case "metadata":
		return scenarioMetadata(ctx, c)
	case "create-topic":
		if err := c.createTopic(ctx, opts.topic, 3); err != nil {
			return err
		}
		return waitPartitions(ctx, c, opts.topic, 3)
	case "produce":
		return scenarioProduce(ctx, c, opts.codec, produceCount, false)
	case "idempotent":
		return scenarioProduce(ctx, c, "none", 1000, true)
	case "list-offsets-time":
		return scenarioListOffsets(ctx, c)
	case "configs":
		return scenarioConfigs(ctx, c)
	case "delete-topic":
		return scenarioDelete(ctx, c)
	case "group":
		return scenarioGroup(ctx, c)
	case "group-kip848":
		opts.kip848 = true
		return scenarioGroup(ctx, c)
	case "group-migration":
		return scenarioMigration(ctx, c)
	case "group-crash", "group-crash-kip848":
		opts.kip848 = strings.HasSuffix(opts.scenario, "-kip848")
		return scenarioCrash(ctx, c)
	case "group-crash-member", "group-crash-member-kip848": // scenarioCrash's child
		opts.kip848 = strings.HasSuffix(opts.scenario, "-kip848")
		return crashMember(ctx, c)
	case "share-group":
		return scenarioShareGroup(ctx, c)
	case "transactions":
		return scenarioTransactions(ctx, c)
	case "compacted-read":
		return scenarioCompactedRead(ctx, c)
	case "secure-produce":
		return scenarioProduce(ctx, c, "none", secureCount, false)
	case "acl-denied":
		return scenarioACLDenied(ctx, c)
	}
	return fmt.Errorf("unknown scenario %q", opts.scenario)
}

// makeRecords returns n records for partition p: key "key-%05d", a value
// of 20 to 119 letters that depends on i, and a header idx=i.
func makeRecords(prefix string, n int, partitions int32) []record {
	out := make([]record, n)
	for i := range n {
		v := make([]byte, 0, 140)
		v = fmt.Appendf(v, "%s-%05d-", prefix, i)
		for j := range 20 + i%100 {
			v = append(v, byte('a'+(i*7+j*13)%26))
		}
		out[i] = record{
			Key:       fmt.Appendf(nil, "key-%05d", i),
			Value:     v,
			Headers:   []header{{"idx", fmt.Sprint(i)}},
			Partition: int32(i) % partitions,
		}
	}
	return out
}

// sameRecords compares got with want in order; withHeaders compares the
// headers too.
func sameRecords(got, want []record, withHeaders bool) error {
	if len(got) != len(want) {
		return fmt.Errorf("consumed %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) {
			return fmt.Errorf("record %d: got key %q value %q, want key %q value %q", i, g.Key, trunc(g.Value), w.Key, trunc(w.Value))
		}
		if withHeaders && fmt.Sprint(g.Headers) != fmt.Sprint(w.Headers) {
			return fmt.Errorf("record %d: headers %v, want %v", i, g.Headers, w.Headers)
		}
		if g.Offset != int64(i) && g.Offset >= 0 {
			return fmt.Errorf("record %d has offset %d", i, g.Offset)
		}
	}
	return nil
}

func trunc(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

func scenarioMetadata(ctx context.Context, c client) error {
	brokers, leaders, err := c.metadata(ctx, opts.topic)
	if err != nil {
		return err
	}
	if brokers != 1 {
		return fmt.Errorf("metadata lists %d brokers, want 1", brokers)
	}
	if len(leaders) != 3 {
		return fmt.Errorf("topic %s has %d partitions in metadata, want 3", opts.topic, len(leaders))
	}
	for p, l := range leaders {
		if l < 0 {
			return fmt.Errorf("partition %d has no leader", p)
		}
	}
	return nil
}

func waitPartitions(ctx context.Context, c client, topic string, n int) error {
	var last error
	for ctx.Err() == nil {
		_, leaders, err := c.metadata(ctx, topic)
		if err == nil && len(leaders) == n {
			return nil
		}
		last = fmt.Errorf("metadata after create: %d partitions, %v", len(leaders), err)
		time.Sleep(200 * time.Millisecond)
	}
	return last
}

func scenarioProduce(ctx context.Context, c client, codec string, n int, idempotent bool) error {
	recs := makeRecords("value", n, 1)
	start := time.Now()
	if err := c.produce(ctx, opts.topic, codec, recs, idempotent); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	logf("produced %d records in %v", n, time.Since(start))
	start = time.Now()
	got, err := c.consume(ctx, opts.topic, 0, n, false)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	logf("consumed %d records in %v", len(got), time.Since(start))
	_, isKcat := c.(*kcatClient)
	if isKcat {
		notes = append(notes, "keys and values compared, not headers: kcat -P cannot set a header per record")
	}
	return sameRecords(got, recs, !isKcat)
}

func scenarioListOffsets(ctx context.Context, c client) error {
	cases := []struct {
		name   string
		ts     int64
		offset int64
	}{
		{"earliest", -2, 0},
		{"latest", -1, 10},
		{"before the first record", timestampBase - 5000, 0},
		{"the first record's timestamp", timestampBase, 0},
		{"between records 4 and 5", timestampBase + 4500, 5},
		{"the last record's timestamp", timestampBase + 9000, 9},
		{"after the last record", timestampBase + 60000, -1},
	}
	for _, tc := range cases {
		o, err := c.offsetForTime(ctx, opts.topic, 0, tc.ts)
		if err != nil {
			return fmt.Errorf("ListOffsets %s (%d): %w", tc.name, tc.ts, err)
		}
		// Kafka answers -1 for a timestamp after the last record; some
		// clients turn that into the log end offset.
		if o != tc.offset && !(tc.offset == -1 && o == 10) {
			return fmt.Errorf("ListOffsets %s (%d): offset %d, want %d", tc.name, tc.ts, o, tc.offset)
		}
	}
	return nil
}

func scenarioConfigs(ctx context.Context, c client) error {
	before, err := c.describeConfigs(ctx, opts.topic)
	if err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	for _, k := range []string{"retention.ms", "cleanup.policy", "segment.bytes"} {
		if _, ok := before[k]; !ok {
			return fmt.Errorf("describe configs: %s missing (got %d configs)", k, len(before))
		}
	}
	if before["cleanup.policy"] != "delete" {
		return fmt.Errorf("describe configs: cleanup.policy = %q, want delete", before["cleanup.policy"])
	}
	if err := c.alterConfig(ctx, opts.topic, "retention.ms", "3600000"); err != nil {
		return fmt.Errorf("alter configs: %w", err)
	}
	after, err := c.describeConfigs(ctx, opts.topic)
	if err != nil {
		return fmt.Errorf("describe configs after alter: %w", err)
	}
	if after["retention.ms"] != "3600000" {
		return fmt.Errorf("retention.ms = %q after alter, want 3600000", after["retention.ms"])
	}
	return nil
}

func scenarioDelete(ctx context.Context, c client) error {
	if err := c.deleteTopic(ctx, opts.topic); err != nil {
		return fmt.Errorf("delete topic: %w", err)
	}
	var leaders []int32
	for ctx.Err() == nil {
		var err error
		_, leaders, err = c.metadata(ctx, opts.topic)
		if err == nil && len(leaders) == 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("topic still in metadata with %d partitions after delete", len(leaders))
}

// waitGroupStable waits until the group is Stable with n members that each
// own at least one partition, asking the broker with franz-go's admin
// client while the members keep polling.
func waitGroupStable(ctx context.Context, n int, members ...member) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(opts.bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(60 * time.Second)
	last := "no answer"
	for time.Now().Before(deadline) {
		for _, m := range members {
			recs, err := m.poll(ctx, 100*time.Millisecond)
			if err != nil {
				return err
			}
			if len(recs) > 0 {
				return fmt.Errorf("member received %d records before any was produced", len(recs))
			}
		}
		if opts.kip848 {
			// Stable: every member has its target assignment.
			gs, err := adm.DescribeConsumerGroups(ctx, opts.group)
			if err != nil {
				last = err.Error()
				continue
			}
			g := gs[opts.group]
			assigned := 0
			for _, m := range g.Members {
				if len(m.Assignment) > 0 {
					assigned++
				}
			}
			last = fmt.Sprintf("state %s, %d members, %d with partitions", g.State, len(g.Members), assigned)
			if g.State == "Stable" && len(g.Members) == n && assigned == n {
				return nil
			}
			continue
		}
		gs, err := adm.DescribeGroups(ctx, opts.group)
		if err != nil {
			last = err.Error()
			continue
		}
		g := gs[opts.group]
		assigned := 0
		for _, m := range g.Members {
			if ca, ok := m.Assigned.AsConsumer(); ok && len(ca.Topics) > 0 && len(ca.Topics[0].Partitions) > 0 {
				assigned++
			}
		}
		last = fmt.Sprintf("state %s, %d members, %d with partitions", g.State, len(g.Members), assigned)
		if g.State == "Stable" && len(g.Members) == n && assigned == n {
			return nil
		}
	}
	return fmt.Errorf("group not stable with %d members within 60s: %s", n, last)
}

// pollUntil polls the members until want values with the prefix have been
// seen, and fails on any other value, on a value seen twice, or after 60s.
// It returns how many records each member received.
func pollUntil(ctx context.Context, prefix string, want int, members ...member) ([]int, error) {
	seen := map[string]int{}
	counts := make([]int, len(members))
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < want {
		if time.Now().After(deadline) {
			return counts, fmt.Errorf("received %d of %d %q records within 60s (per member %v)", len(seen), want, prefix, counts)
		}
		for i, m := range members {
			recs, err := m.poll(ctx, 200*time.Millisecond)
			if err != nil {
				return counts, err
			}
			for _, r := range recs {
				v := string(r.Value)
				if !strings.HasPrefix(v, prefix+"-") {
					return counts, fmt.Errorf("member %d received %q (partition %d offset %d) while waiting for %q records: committed offsets not respected", i, trunc(r.Value), r.Partition, r.Offset, prefix)
				}
				if j, dup := seen[v]; dup {
					return counts, fmt.Errorf("record %q delivered twice (members %d and %d)", v, j, i)
				}
				seen[v] = i
				counts[i]++
			}
		}
	}
	return counts, nil
}

func scenarioGroup(ctx context.Context, c client) error {
	a, err := c.newMember(ctx, opts.topic, opts.group)
	if err != nil {
		return fmt.Errorf("member a: %w", err)
	}
	defer a.close()
	b, err := c.newMember(ctx, opts.topic, opts.group)
	if err != nil {
		return fmt.Errorf("member b: %w", err)
	}
	bOpen := true
	defer func() {
		if bOpen {
			b.close()
		}
	}()
	if err := waitGroupStable(ctx, 2, a, b); err != nil {
		return err
	}
	counts, err := phase(ctx, c, "phase 1 (two members)", "g1", 400, a, b)
	if err != nil {
		return err
	}
	if counts[0] == 0 || counts[1] == 0 {
		return fmt.Errorf("phase 1: one member got nothing (%v): partitions not split", counts)
	}
	bOpen = false
	if err := b.close(); err != nil {
		return fmt.Errorf("close b: %w", err)
	}
	// Produce only once a owns every partition: records a got before its
	// rebalance and had not committed would rightly come again.
	if err := waitGroupStable(ctx, 1, a); err != nil {
		return fmt.Errorf("after b left: %w", err)
	}
	if _, err := phase(ctx, c, "phase 2 (b left, a takes over)", "g2", 400, a); err != nil {
		return err
	}
	if err := a.close(); err != nil {
		return fmt.Errorf("close a: %w", err)
	}
	if err := c.produce(ctx, opts.topic, "none", makeRecords("g3", 100, 4), false); err != nil {
		return fmt.Errorf("produce phase 3: %w", err)
	}
	m, err := c.newMember(ctx, opts.topic, opts.group)
	if err != nil {
		return fmt.Errorf("member c: %w", err)
	}
	defer m.close()
	if _, err := pollUntil(ctx, "g3", 100, m); err != nil {
		return fmt.Errorf("phase 3 (new member resumes from commits): %w", err)
	}
	return nil
}

// phase produces n records with prefix to the scenario's topic, polls
// them with members (every record once, see pollUntil) and commits each
// member's offsets; it returns how many records each received.
func phase(ctx context.Context, c client, what, prefix string, n int, members ...member) ([]int, error) {
	if err := c.produce(ctx, opts.topic, "none", makeRecords(prefix, n, 4), false); err != nil {
		return nil, fmt.Errorf("produce %s: %w", what, err)
	}
	counts, err := pollUntil(ctx, prefix, n, members...)
	if err != nil {
		return counts, fmt.Errorf("%s: %w", what, err)
	}
	for i, m := range members {
		if err := m.commit(ctx); err != nil {
			return counts, fmt.Errorf("%s: commit of member %d: %w", what, i, err)
		}
	}
	return counts, nil
}

// scenarioMigration is the online migration of a group between the
// classic and the KIP-848 consumer protocol (group.consumer.migration.policy
// bidirectional, Kafka's default): a classic member a consumes and commits;
// a KIP-848 member b joins, which converts the group to a consumer group,
// and both consume and commit; b leaves, which converts it back to a
// classic group, and a consumes the rest. Every record once.
func scenarioMigration(ctx context.Context, c client) error {
	a, err := c.newMember(ctx, opts.topic, opts.group)
	if err != nil {
		return fmt.Errorf("classic member a: %w", err)
	}
	defer a.close()
	if err := waitGroupStable(ctx, 1, a); err != nil {
		return fmt.Errorf("classic group: %w", err)
	}
	if _, err := phase(ctx, c, "phase 1 (classic member)", "m1", 200, a); err != nil {
		return err
	}
	opts.kip848 = true
	b, err := c.newMember(ctx, opts.topic, opts.group)
	if err != nil {
		return fmt.Errorf("KIP-848 member b: %w", err)
	}
	bOpen := true
	defer func() {
		if bOpen {
			b.close()
		}
	}()
	// Stable as a consumer group: both members have partitions.
	if err := waitGroupStable(ctx, 2, a, b); err != nil {
		return fmt.Errorf("after the upgrade: %w", err)
	}
	counts, err := phase(ctx, c, "phase 2 (classic and KIP-848 members)", "m2", 400, a, b)
	if err != nil {
		return err
	}
	if counts[0] == 0 || counts[1] == 0 {
		return fmt.Errorf("phase 2: one member got nothing (%v): partitions not split", counts)
	}
	bOpen = false
	if err := b.close(); err != nil {
		return fmt.Errorf("close b: %w", err)
	}
	opts.kip848 = false
	// Stable as a classic group again: a has every partition.
	if err := waitGroupStable(ctx, 1, a); err != nil {
		return fmt.Errorf("after the downgrade: %w", err)
	}
	_, err = phase(ctx, c, "phase 3 (classic again)", "m3", 200, a)
	return err
}

func scenarioTransactions(ctx context.Context, c client) error {
	p, err := c.newTxnProducer(ctx, opts.topic, "conf-txn-"+opts.client)
	if err != nil {
		return err
	}
	defer p.close()
	t1 := makeRecords("t1", 100, 1)
	t2 := makeRecords("t2", 50, 1)
	t3 := makeRecords("t3", 100, 1)
	for i, step := range []struct {
		recs   []record
		commit bool
	}{{t1, true}, {t2, false}, {t3, true}} {
		if err := p.begin(); err != nil {
			return fmt.Errorf("transaction %d: begin: %w", i+1, err)
		}
		if err := p.produce(ctx, step.recs); err != nil {
			return fmt.Errorf("transaction %d: produce: %w", i+1, err)
		}
		if step.commit {
			err = p.commit(ctx)
		} else {
			err = p.abort(ctx)
		}
		if err != nil {
			return fmt.Errorf("transaction %d: end (commit=%v): %w", i+1, step.commit, err)
		}
	}
	committed := append(append([]record{}, t1...), t3...)
	got, err := c.consume(ctx, opts.topic, 0, len(committed), true)
	if err != nil {
		return fmt.Errorf("read_committed consume: %w", err)
	}
	if err := sameValues(got, committed); err != nil {
		return fmt.Errorf("read_committed: %w", err)
	}
	all := append(append(append([]record{}, t1...), t2...), t3...)
	got, err = c.consume(ctx, opts.topic, 0, len(all), false)
	if err != nil {
		return fmt.Errorf("read_uncommitted consume: %w", err)
	}
	if err := sameValues(got, all); err != nil {
		return fmt.Errorf("read_uncommitted: %w", err)
	}
	return nil
}

func sameValues(got, want []record) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].Value, want[i].Value) {
			return fmt.Errorf("record %d: %q, want %q", i, trunc(got[i].Value), trunc(want[i].Value))
		}
	}
	return nil
}

// sortedPartitions is a helper for clients whose metadata comes as a map.
func sortedPartitions(m map[int32]int32) []int32 {
	keys := make([]int32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	out := make([]int32, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// scenarioACLDenied produces one record to a topic the principal may
// describe but not write: the produce must fail with the client's
// TOPIC_AUTHORIZATION_FAILED. The error text is reported as DATA.
func scenarioACLDenied(ctx context.Context, c client) error {
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := c.produce(pctx, opts.topic, "none", makeRecords("denied", 1, 1), false)
	if err == nil {
		return errors.New("produce without WRITE on the topic succeeded")
	}
	err = recordErr(err)
	fmt.Printf("DATA %s\n", strings.Join(strings.Fields(err.Error()), " "))
	if !topicAuthzFailed(c, err) {
		return fmt.Errorf("produce failed, but not with the client's TOPIC_AUTHORIZATION_FAILED: %w", err)
	}
	msg := err.Error()
	if _, ok := c.(*kcatClient); ok {
		// kcat's error is its command line, exit status and stderr.
		_, msg, _ = strings.Cut(msg, ": exit status ")
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	notes = append(notes, "the client's error: "+msg)
	return nil
}
