package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProduceCount is how many records the produce scenarios write and read
// back.
const ProduceCount = 10000

// TimestampBase is the CreateTime, in Unix milliseconds, of the first of
// the ten records that list-offsets-time finds by timestamp; record i has
// TimestampBase + i*1000. Runners hard-code it too.
const TimestampBase int64 = 1700000000000

// Scenario is one column of the compatibility table.
type Scenario struct {
	ID    string // column name and the runner's --scenario (with Codec split off)
	Title string // what the scenario checks, for the doc
	// Runner is the --scenario passed to runners; Codec their --codec.
	Runner, Codec string
	// Needs are the APIs the broker must advertise for the scenario to run;
	// until it does, the scenario is "not yet".
	Needs []kmsg.Key
	// Partitions of the topic created by the driver before the runner
	// starts; 0 means the driver creates none.
	Partitions int32
	// Configs of that topic (Kafka topic config names); nil means the
	// broker's defaults.
	Configs map[string]string
	// Setup runs after the topic is created, before the runner.
	Setup func(ctx context.Context, e *Env) error
	// Verify checks from the broker's side what the runner left, after it
	// reported a pass.
	Verify func(ctx context.Context, e *Env) error
	// Listener is the secured listener the runner connects to ("SASL_SSL"
	// or "SSL", see Security); "" is the PLAINTEXT one.
	Listener string
	// Nodes is ClusterNodes for a scenario run on the cluster every client
	// shares (StartCluster), with its topic replicated on every node; 0 is
	// the client's own single node.
	Nodes int
}

// Env is what setup and verify functions get: a franz-go client on the
// scenario's server, and the scenario's topic and group names.
type Env struct {
	Client *kgo.Client
	Admin  *kadm.Client
	Topic  string
	Group  string
	Addr   string // the server's bootstrap host:port
	Dir    string // the server's log.dirs
	// Reported is the runner's last `DATA ` line (without the prefix),
	// for Verify; "" when it printed none.
	Reported string
	// Logf writes to the test log.
	Logf func(format string, args ...any)
}

var produceNeeds = []kmsg.Key{kmsg.Metadata, kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets}

// groupNeeds are the classic consumer-group APIs.
var groupNeeds = []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.SyncGroup,
	kmsg.Heartbeat, kmsg.LeaveGroup, kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.DescribeGroups}

// Scenarios are the table's columns, in order.
var Scenarios = []Scenario{
	{ID: "metadata", Title: "Metadata: one broker, a topic of 3 partitions with leaders",
		Runner: "metadata", Needs: []kmsg.Key{kmsg.ApiVersions, kmsg.Metadata}, Partitions: 3},
	{ID: "create-topic", Title: "create a topic of 3 partitions with the client's admin API",
		Runner: "create-topic", Needs: []kmsg.Key{kmsg.CreateTopics, kmsg.Metadata},
		Verify: verifyTopicPartitions(3)},
	produceScenario("none"),
	produceScenario("gzip"),
	produceScenario("snappy"),
	produceScenario("lz4"),
	produceScenario("zstd"),
	{ID: "list-offsets-time", Title: "ListOffsets by timestamp, earliest and latest over 10 records with CreateTime 1s apart",
		Runner: "list-offsets-time", Needs: []kmsg.Key{kmsg.Metadata, kmsg.ListOffsets}, Partitions: 1,
		// The records' CreateTime is in 2023, past the default
		// retention.ms (7 days): the broker's first retention check
		// (log.retention.check.interval.ms, 5 min after its start) would
		// delete them all, as Kafka's would.
		Configs: map[string]string{"retention.ms": "-1"},
		Setup:   setupTimestamps},
	{ID: "group", Title: "two members of a group split 4 partitions, commit; one leaves, the other takes over from the commits; a new member resumes from the commits",
		Runner: "group", Needs: append(append([]kmsg.Key{}, produceNeeds...), groupNeeds...), Partitions: 4},
	{ID: "group-kip848", Title: "the group scenario with the KIP-848 consumer protocol (ConsumerGroupHeartbeat, server-side assignment)",
		Runner: "group-kip848", Needs: append(append([]kmsg.Key{}, produceNeeds...), kmsg.FindCoordinator,
			kmsg.ConsumerGroupHeartbeat, kmsg.ConsumerGroupDescribe, kmsg.OffsetCommit, kmsg.OffsetFetch), Partitions: 4},
	{ID: "group-migration", Title: "online migration of one group: a classic member consumes; a KIP-848 member joins (the group becomes a consumer group) and both consume; it leaves (the group is classic again) and the classic member consumes; every record once, from the commits",
		Runner: "group-migration", Needs: append(append([]kmsg.Key{}, produceNeeds...), append(groupNeeds,
			kmsg.ConsumerGroupHeartbeat, kmsg.ConsumerGroupDescribe, kmsg.ListGroups)...), Partitions: 4},
	{ID: "share-group", Title: "share group (KIP-932): two share consumers of 300 records in 3 partitions accept, release (redelivered with a higher delivery count) and reject; one is closed and replaced; every record accepted once or rejected, every share-partition's start offset at the log end",
		Runner: "share-group", Needs: append(append([]kmsg.Key{}, produceNeeds...), kmsg.FindCoordinator, kmsg.IncrementalAlterConfigs,
			kmsg.ShareGroupHeartbeat, kmsg.ShareFetch, kmsg.ShareAcknowledge, kmsg.DescribeShareGroupOffsets), Partitions: 3,
		Setup: setupShareGroup, Verify: verifyShareGroup},
	{ID: "idempotent", Title: "idempotent producer: 1,000 records, read back once each in order",
		Runner: "idempotent", Needs: append([]kmsg.Key{kmsg.InitProducerID}, produceNeeds...), Partitions: 1,
		Verify: verifyIdempotent},
	{ID: "transactions", Title: "transactions: commit 100, abort 50, commit 100; read_committed sees 200, read_uncommitted 250",
		Runner: "transactions", Needs: append([]kmsg.Key{kmsg.InitProducerID, kmsg.FindCoordinator,
			kmsg.AddPartitionsToTxn, kmsg.EndTxn}, produceNeeds...), Partitions: 1},
	{ID: "configs", Title: "describe a topic's configs, alter retention.ms, describe again",
		Runner: "configs", Needs: []kmsg.Key{kmsg.DescribeConfigs, kmsg.AlterConfigs, kmsg.IncrementalAlterConfigs},
		Partitions: 1, Verify: verifyRetention},
	{ID: "delete-topic", Title: "delete a topic with the client's admin API; metadata no longer lists it",
		Runner: "delete-topic", Needs: []kmsg.Key{kmsg.DeleteTopics, kmsg.Metadata}, Partitions: 2,
		Verify: verifyDeleted},
	compactedScenario(),
	malformedScenario(),
}

func init() {
	Scenarios = append(Scenarios, securityScenarios()...)
	Scenarios = append(Scenarios, clusterScenarios(Scenarios)...)
}

func produceScenario(codec string) Scenario {
	return Scenario{
		ID:     "produce-" + codec,
		Title:  fmt.Sprintf("produce %d records compressed with %s, consume them back and compare keys, values and headers", ProduceCount, codec),
		Runner: "produce", Codec: codec, Needs: produceNeeds, Partitions: 1,
		Verify: func(ctx context.Context, e *Env) error { return verifyProduced(ctx, e, codec) },
	}
}

// codecs maps a codec name to the record batch attributes' low three bits.
var codecs = map[string]int16{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// maxUncompressedShare bounds the records of a first fetch that may sit
// in uncompressed batches when a codec was asked for, in percent.
// librdkafka (rd_kafka_msgset_writer_compress) sends a batch uncompressed
// when compressing it made it larger, which happens to a batch of one or
// a few small records (an LZ4 frame alone adds 15 bytes); a client that
// never compressed fails the check.
const maxUncompressedShare = 5

// verifyProduced checks that partition 0 holds exactly ProduceCount
// records and that the batches of the first fetch use the codec: every
// batch has it or none, and batches without it hold at most
// maxUncompressedShare percent of the records read.
func verifyProduced(ctx context.Context, e *Env, codec string) error {
	end, err := endOffset(ctx, e)
	if err != nil {
		return err
	}
	if end != ProduceCount {
		return fmt.Errorf("broker side: log end offset %d, want %d (lost or duplicated records)", end, ProduceCount)
	}
	batches, err := fetchBatches(ctx, e, 0)
	if err != nil {
		return err
	}
	var total, plain int
	for _, b := range batches {
		got := b.Attributes & 7
		total += int(b.NumRecords)
		switch {
		case got == codecs[codec]:
		case got == 0:
			plain += int(b.NumRecords)
		default:
			return fmt.Errorf("broker side: batch at offset %d has codec %d, want %d (%s)", b.FirstOffset, got, codecs[codec], codec)
		}
	}
	if total == 0 {
		return errors.New("broker side: the first fetch returned no records")
	}
	if plain > 0 {
		e.logf("%d of %d records read are in uncompressed batches", plain, total)
	}
	if plain*100 > total*maxUncompressedShare {
		return fmt.Errorf("broker side: %d of %d records read are in uncompressed batches, want %s (at most %d%% may be sent uncompressed when compressing made a batch larger)", plain, total, codec, maxUncompressedShare)
	}
	return nil
}

func verifyIdempotent(ctx context.Context, e *Env) error {
	end, err := endOffset(ctx, e)
	if err != nil {
		return err
	}
	if end != 1000 {
		return fmt.Errorf("broker side: log end offset %d, want 1000", end)
	}
	batches, err := fetchBatches(ctx, e, 0)
	if err != nil {
		return err
	}
	for _, b := range batches {
		if b.ProducerID < 0 {
			return fmt.Errorf("broker side: batch at offset %d has no producer id: not idempotent", b.FirstOffset)
		}
	}
	return nil
}

func endOffset(ctx context.Context, e *Env) (int64, error) {
	ends, err := e.Admin.ListEndOffsets(ctx, e.Topic)
	if err != nil {
		return 0, fmt.Errorf("broker side: list end offsets: %w", err)
	}
	o, ok := ends.Lookup(e.Topic, 0)
	if !ok {
		return 0, fmt.Errorf("broker side: no end offset for %s-0", e.Topic)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("broker side: end offset of %s-0: %w", e.Topic, o.Err)
	}
	return o.Offset, nil
}

// fetchBatches fetches partition 0 of e.Topic from offset with a raw
// Fetch request and decodes the record batch headers of the response.
func fetchBatches(ctx context.Context, e *Env, offset int64) ([]kmsg.RecordBatch, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = e.Topic
	// Fetch v13+ names topics by ID; the client picks the version.
	td, err := e.Admin.ListTopics(ctx, e.Topic)
	if err != nil {
		return nil, fmt.Errorf("broker side: metadata: %w", err)
	}
	rt.TopicID = td[e.Topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, e.Client)
	if err != nil {
		return nil, fmt.Errorf("broker side: fetch: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, errors.New("broker side: fetch response without the partition")
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return nil, fmt.Errorf("broker side: fetch error code %d", p.ErrorCode)
	}
	var out []kmsg.RecordBatch
	raw := p.RecordBatches
	for len(raw) >= 12 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			break // a partial batch at the end of the response
		}
		out = append(out, b)
		n := 12 + int(b.Length)
		if n > len(raw) {
			break
		}
		raw = raw[n:]
	}
	if len(out) == 0 {
		return nil, errors.New("broker side: fetch from offset 0 returned no batch")
	}
	return out, nil
}

func verifyTopicPartitions(n int) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
		td, err := e.Admin.ListTopics(ctx, e.Topic)
		if err != nil {
			return fmt.Errorf("broker side: metadata: %w", err)
		}
		t, ok := td[e.Topic]
		if !ok || t.Err != nil {
			return fmt.Errorf("broker side: topic %s not listed (%v)", e.Topic, t.Err)
		}
		if len(t.Partitions) != n {
			return fmt.Errorf("broker side: topic %s has %d partitions, want %d", e.Topic, len(t.Partitions), n)
		}
		return nil
	}
}

func verifyRetention(ctx context.Context, e *Env) error {
	rcs, err := e.Admin.DescribeTopicConfigs(ctx, e.Topic)
	if err != nil {
		return fmt.Errorf("broker side: describe configs: %w", err)
	}
	rc, err := rcs.On(e.Topic, nil)
	if err != nil {
		return fmt.Errorf("broker side: describe configs: %w", err)
	}
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			if c.MaybeValue() != "3600000" {
				return fmt.Errorf("broker side: retention.ms = %q, want 3600000", c.MaybeValue())
			}
			return nil
		}
	}
	return errors.New("broker side: retention.ms not described")
}

// verifyDeleted asks the broker for every topic with a Metadata request
// of its own: kadm's ListTopics may answer from franz-go's cache of the
// last request for every topic, up to 5 s old (MetadataMinAge), which can
// predate the delete.
func verifyDeleted(ctx context.Context, e *Env) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // every topic
	resp, err := req.RequestWith(ctx, e.Client)
	if err != nil {
		return fmt.Errorf("broker side: metadata: %w", err)
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == e.Topic {
			return fmt.Errorf("broker side: topic %s still listed after delete", e.Topic)
		}
	}
	return nil
}

// setupTimestamps writes ten records, one batch each, with CreateTime
// TimestampBase + i*1000 and value "ts-i".
func setupTimestamps(ctx context.Context, e *Env) error {
	for i := range 10 {
		r := &kgo.Record{Topic: e.Topic, Partition: 0, Value: fmt.Appendf(nil, "ts-%d", i),
			Timestamp: time.UnixMilli(TimestampBase + int64(i)*1000)}
		if err := e.Client.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("setup: produce timestamped record %d: %w", i, err)
		}
	}
	return nil
}
