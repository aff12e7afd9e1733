package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaVersion is the protocol level sarama is told the broker has.
var saramaVersion = sarama.V3_7_0_0

type saramaClient struct {
	addrs []string
	adm   sarama.ClusterAdmin
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = saramaVersion
	cfg.ClientID = "samsa-conformance"
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	_ = saramaSecurity(cfg) // checked by newSarama
	return cfg
}

func newSarama(bootstrap string) (client, error) {
	if err := saramaSecurity(sarama.NewConfig()); err != nil {
		return nil, err
	}
	return &saramaClient{addrs: []string{bootstrap}}, nil
}

func (c *saramaClient) admin() (sarama.ClusterAdmin, error) {
	if c.adm != nil {
		return c.adm, nil
	}
	adm, err := sarama.NewClusterAdmin(c.addrs, saramaConfig())
	if err != nil {
		return nil, err
	}
	c.adm = adm
	return adm, nil
}

func (c *saramaClient) version() string { return moduleVersion("github.com/IBM/sarama") }
func (c *saramaClient) close() {
	if c.adm != nil {
		c.adm.Close()
	}
}

func (c *saramaClient) metadata(ctx context.Context, topic string) (int, []int32, error) {
	cl, err := sarama.NewClient(c.addrs, saramaConfig())
	if err != nil {
		return 0, nil, err
	}
	defer cl.Close()
	// All topics: asking for a named one may auto-create it.
	if err := cl.RefreshMetadata(); err != nil {
		return 0, nil, err
	}
	topics, err := cl.Topics()
	if err != nil {
		return 0, nil, err
	}
	if !slices.Contains(topics, topic) {
		return len(cl.Brokers()), nil, nil
	}
	parts, err := cl.Partitions(topic)
	if err != nil {
		return 0, nil, err
	}
	m := map[int32]int32{}
	for _, p := range parts {
		m[p] = -1
		if b, err := cl.Leader(topic, p); err == nil {
			m[p] = b.ID()
		}
	}
	return len(cl.Brokers()), sortedPartitions(m), nil
}

func (c *saramaClient) createTopic(ctx context.Context, topic string, partitions int32) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
}

func saramaCodec(codec string) (sarama.CompressionCodec, error) {
	switch codec {
	case "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return 0, fmt.Errorf("unknown codec %q", codec)
}

func toSarama(topic string, recs []record) []*sarama.ProducerMessage {
	out := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		m := &sarama.ProducerMessage{Topic: topic, Partition: r.Partition,
			Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value)}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: []byte(h.Value)})
		}
		out[i] = m
	}
	return out
}

func fromSarama(m *sarama.ConsumerMessage) record {
	r := record{Key: m.Key, Value: m.Value, Partition: m.Partition, Offset: m.Offset}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, header{string(h.Key), string(h.Value)})
	}
	return r
}

func (c *saramaClient) produce(ctx context.Context, topic, codec string, recs []record, idempotent bool) error {
	cfg := saramaConfig()
	cc, err := saramaCodec(codec)
	if err != nil {
		return err
	}
	cfg.Producer.Compression = cc
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Flush.Messages = 500
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	if idempotent {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	p, err := sarama.NewSyncProducer(c.addrs, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	return p.SendMessages(toSarama(topic, recs))
}

func (c *saramaClient) consume(ctx context.Context, topic string, partition int32, n int, readCommitted bool) ([]record, error) {
	cfg := saramaConfig()
	cfg.Consumer.Return.Errors = true
	if readCommitted {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	cons, err := sarama.NewConsumer(c.addrs, cfg)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, partition, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	var out []record
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			out = append(out, fromSarama(m))
		case err := <-pc.Errors():
			return out, err
		case <-ctx.Done():
			return out, fmt.Errorf("after %d records: %w", len(out), ctx.Err())
		}
	}
	return out, nil
}

func (c *saramaClient) offsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	cl, err := sarama.NewClient(c.addrs, saramaConfig())
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	return cl.GetOffset(topic, partition, ts)
}

func (c *saramaClient) describeConfigs(ctx context.Context, topic string) (map[string]string, error) {
	adm, err := c.admin()
	if err != nil {
		return nil, err
	}
	res, err := adm.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic}}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("%d resources in the answer", len(res))
	}
	if res[0].ErrorCode != sarama.ErrNoError {
		return nil, fmt.Errorf("%w: %s", res[0].ErrorCode, res[0].ErrorMsg)
	}
	out := map[string]string{}
	for _, e := range res[0].Configs {
		out[e.Name] = e.Value
	}
	return out, nil
}

func (c *saramaClient) alterConfig(ctx context.Context, topic, key, value string) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	return adm.IncrementalAlterConfig(sarama.TopicResource, topic,
		map[string]sarama.IncrementalAlterConfigsEntry{key: {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &value}}, false)
}

func (c *saramaClient) deleteTopic(ctx context.Context, topic string) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	return adm.DeleteTopic(topic)
}

// saramaMember runs a consumer group session in a goroutine; its handler
// marks each message and hands it to poll.
type saramaMember struct {
	topic  string
	cg     sarama.ConsumerGroup
	msgs   chan record
	errs   chan error
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	sess sarama.ConsumerGroupSession // the current session, nil between sessions
}

func (c *saramaClient) newMember(ctx context.Context, topic, group string) (member, error) {
	if opts.kip848 {
		return nil, na{"sarama has no KIP-848 consumer"}
	}
	cfg := saramaConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cg, err := sarama.NewConsumerGroup(c.addrs, group, cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{topic: topic, cg: cg, msgs: make(chan record, 10000), errs: make(chan error, 100), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, m); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				select {
				case m.errs <- err:
				default:
				}
				return
			}
		}
	}()
	go func() {
		for err := range cg.Errors() {
			select {
			case m.errs <- err:
			default:
			}
		}
	}()
	return m, nil
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	m.sess = s
	m.mu.Unlock()
	return nil
}

func (m *saramaMember) Cleanup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	m.sess = nil
	m.mu.Unlock()
	return nil
}

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			m.msgs <- fromSarama(msg) // marked by poll, which returns it

		case <-s.Context().Done():
			return nil
		}
	}
}

// poll marks the records it returns, and only those, for commit: the
// claims' goroutines run ahead into m.msgs, and group-crash counts on a
// killed member having committed only records it returned.
func (m *saramaMember) poll(ctx context.Context, d time.Duration) ([]record, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	var out []record
	defer func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.sess == nil {
			return
		}
		for _, r := range out {
			m.sess.MarkOffset(m.topic, r.Partition, r.Offset+1, "")
		}
	}()
	for {
		select {
		case r := <-m.msgs:
			out = append(out, r)
			if len(out) >= 1000 {
				return out, nil
			}
		case err := <-m.errs:
			return out, err
		case <-t.C:
			return out, nil
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
}

func (m *saramaMember) commit(ctx context.Context) error {
	m.mu.Lock()
	s := m.sess
	m.mu.Unlock()
	if s == nil {
		return errors.New("no session to commit in")
	}
	s.Commit()
	select {
	case err := <-m.errs:
		return err
	default:
		return nil
	}
}

func (m *saramaMember) close() error {
	m.cancel()
	err := m.cg.Close()
	<-m.done
	return err
}

type saramaTxn struct {
	p     sarama.SyncProducer
	topic string
}

func (c *saramaClient) newTxnProducer(ctx context.Context, topic, txnID string) (txnProducer, error) {
	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = txnID
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(c.addrs, cfg)
	if err != nil {
		return nil, err
	}
	return &saramaTxn{p: p, topic: topic}, nil
}

func (t *saramaTxn) begin() error { return t.p.BeginTxn() }
func (t *saramaTxn) produce(ctx context.Context, recs []record) error {
	return t.p.SendMessages(toSarama(t.topic, recs))
}
func (t *saramaTxn) commit(ctx context.Context) error { return t.p.CommitTxn() }
func (t *saramaTxn) abort(ctx context.Context) error  { return t.p.AbortTxn() }
func (t *saramaTxn) close()                           { t.p.Close() }

func (c *saramaClient) consumeFrom(ctx context.Context, topic string, partition int32, fn func(record) (bool, error)) error {
	cfg := saramaConfig()
	cfg.Consumer.Return.Errors = true
	cons, err := sarama.NewConsumer(c.addrs, cfg)
	if err != nil {
		return err
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, partition, sarama.OffsetOldest)
	if err != nil {
		return err
	}
	defer pc.Close()
	for {
		select {
		case m := <-pc.Messages():
			if stop, err := fn(fromSarama(m)); stop || err != nil {
				return err
			}
		case err := <-pc.Errors():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
