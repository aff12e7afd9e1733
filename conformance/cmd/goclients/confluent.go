package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

type confluentClient struct {
	bootstrap string
	adm       *kafka.AdminClient
}

func newConfluent(bootstrap string) (client, error) {
	return &confluentClient{bootstrap: bootstrap}, nil
}

func (c *confluentClient) conf(extra kafka.ConfigMap) *kafka.ConfigMap {
	m := kafka.ConfigMap{"bootstrap.servers": c.bootstrap, "client.id": "samsa-conformance"}
	for k, v := range librdkafkaSecurity() {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return &m
}

func (c *confluentClient) admin() (*kafka.AdminClient, error) {
	if c.adm == nil {
		adm, err := kafka.NewAdminClient(c.conf(nil))
		if err != nil {
			return nil, err
		}
		c.adm = adm
	}
	return c.adm, nil
}

func (c *confluentClient) version() string {
	_, lib := kafka.LibraryVersion()
	return moduleVersion("github.com/confluentinc/confluent-kafka-go/v2") + " (librdkafka " + lib + ")"
}

func (c *confluentClient) close() {
	if c.adm != nil {
		c.adm.Close()
	}
}

func (c *confluentClient) metadata(ctx context.Context, topic string) (int, []int32, error) {
	adm, err := c.admin()
	if err != nil {
		return 0, nil, err
	}
	md, err := adm.GetMetadata(nil, true, 10000) // all topics: a named one may be auto-created
	if err != nil {
		return 0, nil, err
	}
	t, ok := md.Topics[topic]
	if !ok || t.Error.Code() != kafka.ErrNoError {
		return len(md.Brokers), nil, nil
	}
	m := map[int32]int32{}
	for _, p := range t.Partitions {
		m[p.ID] = p.Leader
	}
	return len(md.Brokers), sortedPartitions(m), nil
}

func (c *confluentClient) createTopic(ctx context.Context, topic string, partitions int32) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	rs, err := adm.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: int(partitions), ReplicationFactor: 1}})
	if err != nil {
		return err
	}
	return resultErr(rs[0].Error)
}

func resultErr(e kafka.Error) error {
	if e.Code() == kafka.ErrNoError {
		return nil
	}
	return e
}

func toConfluent(topic string, r record) *kafka.Message {
	m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: r.Partition}, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: []byte(h.Value)})
	}
	return m
}

func fromConfluent(m *kafka.Message) record {
	r := record{Key: m.Key, Value: m.Value, Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset)}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, header{h.Key, string(h.Value)})
	}
	return r
}

// produceAll sends recs and waits for every delivery report.
func produceAll(ctx context.Context, p *kafka.Producer, topic string, recs []record) error {
	dr := make(chan kafka.Event, len(recs))
	for _, r := range recs {
		for {
			err := p.Produce(toConfluent(topic, r), dr)
			if err == nil {
				break
			}
			var ke kafka.Error
			if errors.As(err, &ke) && ke.Code() == kafka.ErrQueueFull {
				p.Flush(100)
				continue
			}
			return err
		}
	}
	for range recs {
		select {
		case ev := <-dr:
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				return m.TopicPartition.Error
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (c *confluentClient) produce(ctx context.Context, topic, codec string, recs []record, idempotent bool) error {
	p, err := kafka.NewProducer(c.conf(kafka.ConfigMap{"compression.type": codec, "linger.ms": 5,
		"acks": "all", "enable.idempotence": idempotent}))
	if err != nil {
		return err
	}
	defer p.Close()
	return produceAll(ctx, p, topic, recs)
}

func (c *confluentClient) consume(ctx context.Context, topic string, partition int32, n int, readCommitted bool) ([]record, error) {
	iso := "read_uncommitted"
	if readCommitted {
		iso = "read_committed"
	}
	// group.id is required by the Go binding even for assign(); no group
	// API is used without subscribe or commit.
	cons, err := kafka.NewConsumer(c.conf(kafka.ConfigMap{"group.id": "samsa-conformance-assign",
		"enable.auto.commit": false, "isolation.level": iso}))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	if err := cons.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: partition, Offset: kafka.OffsetBeginning}}); err != nil {
		return nil, err
	}
	var out []record
	for len(out) < n {
		if ctx.Err() != nil {
			return out, fmt.Errorf("after %d records: %w", len(out), ctx.Err())
		}
		switch ev := cons.Poll(200).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return out, ev.TopicPartition.Error
			}
			out = append(out, fromConfluent(ev))
		case kafka.Error:
			if ev.IsFatal() {
				return out, ev
			}
			logf("consumer error (not fatal): %v", ev)
		}
	}
	return out, nil
}

func (c *confluentClient) offsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	cons, err := kafka.NewConsumer(c.conf(kafka.ConfigMap{"group.id": "samsa-conformance-offsets"}))
	if err != nil {
		return 0, err
	}
	defer cons.Close()
	switch ts {
	case -2, -1:
		lo, hi, err := cons.QueryWatermarkOffsets(topic, partition, 10000)
		if ts == -2 {
			return lo, err
		}
		return hi, err
	}
	tps, err := cons.OffsetsForTimes([]kafka.TopicPartition{{Topic: &topic, Partition: partition, Offset: kafka.Offset(ts)}}, 10000)
	if err != nil {
		return 0, err
	}
	if tps[0].Error != nil {
		return 0, tps[0].Error
	}
	return int64(tps[0].Offset), nil
}

func (c *confluentClient) describeConfigs(ctx context.Context, topic string) (map[string]string, error) {
	adm, err := c.admin()
	if err != nil {
		return nil, err
	}
	rs, err := adm.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: topic}})
	if err != nil {
		return nil, err
	}
	if err := resultErr(rs[0].Error); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, e := range rs[0].Config {
		out[k] = e.Value
	}
	return out, nil
}

func (c *confluentClient) alterConfig(ctx context.Context, topic, key, value string) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	rs, err := adm.IncrementalAlterConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: topic,
		Config: []kafka.ConfigEntry{{Name: key, Value: value, IncrementalOperation: kafka.AlterConfigOpTypeSet}}}})
	if err != nil {
		return err
	}
	return resultErr(rs[0].Error)
}

func (c *confluentClient) deleteTopic(ctx context.Context, topic string) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	rs, err := adm.DeleteTopics(ctx, []string{topic})
	if err != nil {
		return err
	}
	return resultErr(rs[0].Error)
}

type confluentMember struct {
	c *kafka.Consumer
}

func (c *confluentClient) newMember(ctx context.Context, topic, group string) (member, error) {
	cfg := kafka.ConfigMap{"group.id": group, "enable.auto.commit": false,
		"auto.offset.reset": "earliest", "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000}
	if opts.kip848 {
		// KIP-848 (librdkafka 2.4+): the broker sets the session and
		// heartbeat interval.
		cfg = kafka.ConfigMap{"group.id": group, "enable.auto.commit": false,
			"auto.offset.reset": "earliest", "group.protocol": "consumer"}
	}
	cons, err := kafka.NewConsumer(c.conf(cfg))
	if err != nil {
		return nil, err
	}
	if err := cons.Subscribe(topic, nil); err != nil {
		cons.Close()
		return nil, err
	}
	return &confluentMember{c: cons}, nil
}

func (m *confluentMember) poll(ctx context.Context, d time.Duration) ([]record, error) {
	deadline := time.Now().Add(d)
	var out []record
	for time.Now().Before(deadline) && len(out) < 1000 {
		switch ev := m.c.Poll(50).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return out, ev.TopicPartition.Error
			}
			out = append(out, fromConfluent(ev))
		case kafka.Error:
			if ev.IsFatal() {
				return out, ev
			}
			logf("consumer error (not fatal): %v", ev)
		}
	}
	return out, nil
}

func (m *confluentMember) commit(ctx context.Context) error {
	_, err := m.c.Commit()
	var ke kafka.Error
	if errors.As(err, &ke) && ke.Code() == kafka.ErrNoOffset {
		return nil // nothing consumed since the last commit
	}
	return err
}

func (m *confluentMember) close() error { return m.c.Close() }

type confluentTxn struct {
	p     *kafka.Producer
	topic string
}

func (c *confluentClient) newTxnProducer(ctx context.Context, topic, txnID string) (txnProducer, error) {
	p, err := kafka.NewProducer(c.conf(kafka.ConfigMap{"transactional.id": txnID, "linger.ms": 5}))
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.InitTransactions(ictx); err != nil {
		p.Close()
		return nil, fmt.Errorf("init transactions: %w", err)
	}
	return &confluentTxn{p: p, topic: topic}, nil
}

func (t *confluentTxn) begin() error { return t.p.BeginTransaction() }
func (t *confluentTxn) produce(ctx context.Context, recs []record) error {
	return produceAll(ctx, t.p, t.topic, recs)
}
func (t *confluentTxn) commit(ctx context.Context) error { return t.p.CommitTransaction(ctx) }
func (t *confluentTxn) abort(ctx context.Context) error  { return t.p.AbortTransaction(ctx) }
func (t *confluentTxn) close()                           { t.p.Close() }

func (c *confluentClient) consumeFrom(ctx context.Context, topic string, partition int32, fn func(record) (bool, error)) error {
	cons, err := kafka.NewConsumer(c.conf(kafka.ConfigMap{"group.id": "samsa-conformance-assign", "enable.auto.commit": false}))
	if err != nil {
		return err
	}
	defer cons.Close()
	if err := cons.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: partition, Offset: kafka.OffsetBeginning}}); err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch ev := cons.Poll(200).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return ev.TopicPartition.Error
			}
			if stop, err := fn(fromConfluent(ev)); stop || err != nil {
				return err
			}
		case kafka.Error:
			if ev.IsFatal() {
				return ev
			}
			logf("consumer error (not fatal): %v", ev)
		}
	}
}
