package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

type kafkaGoClient struct {
	bootstrap string
	cl        *kafka.Client
	// transport (Client, Writer) and dialer (Reader) carry the TLS and
	// SASL settings, see kafkaGoSecurity.
	transport *kafka.Transport
	dialer    *kafka.Dialer
}

func newKafkaGo(bootstrap string) (client, error) {
	t, d, err := kafkaGoSecurity()
	if err != nil {
		return nil, err
	}
	return &kafkaGoClient{bootstrap: bootstrap, transport: t, dialer: d,
		cl: &kafka.Client{Addr: kafka.TCP(bootstrap), Timeout: 30 * time.Second, Transport: t}}, nil
}

func (c *kafkaGoClient) version() string { return moduleVersion("github.com/segmentio/kafka-go") }
func (c *kafkaGoClient) close()          {}

func (c *kafkaGoClient) metadata(ctx context.Context, topic string) (int, []int32, error) {
	md, err := c.cl.Metadata(ctx, &kafka.MetadataRequest{}) // all topics: a named one may be auto-created
	if err != nil {
		return 0, nil, err
	}
	m := map[int32]int32{}
	for _, t := range md.Topics {
		if t.Name != topic || t.Error != nil {
			continue
		}
		for _, p := range t.Partitions {
			m[int32(p.ID)] = int32(p.Leader.ID)
			if p.Leader.Host == "" {
				m[int32(p.ID)] = -1
			}
		}
	}
	return len(md.Brokers), sortedPartitions(m), nil
}

func (c *kafkaGoClient) createTopic(ctx context.Context, topic string, partitions int32) error {
	resp, err := c.cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: int(partitions), ReplicationFactor: 1}}})
	if err != nil {
		return err
	}
	return resp.Errors[topic]
}

func kafkaGoCodec(codec string) (kafka.Compression, error) {
	switch codec {
	case "none":
		return 0, nil
	case "gzip":
		return kafka.Gzip, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("unknown codec %q", codec)
}

// keyBalancer sends record "key-N" to partition N mod the partition count,
// as makeRecords sets record.Partition (kafka-go's writer ignores
// Message.Partition).
var keyBalancer = kafka.BalancerFunc(func(m kafka.Message, parts ...int) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(string(m.Key), "key-"))
	return parts[n%len(parts)]
})

func toKafkaGo(recs []record) []kafka.Message {
	out := make([]kafka.Message, len(recs))
	for i, r := range recs {
		m := kafka.Message{Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: []byte(h.Value)})
		}
		out[i] = m
	}
	return out
}

func fromKafkaGo(m kafka.Message) record {
	r := record{Key: m.Key, Value: m.Value, Partition: int32(m.Partition), Offset: m.Offset}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, header{h.Key, string(h.Value)})
	}
	return r
}

func (c *kafkaGoClient) produce(ctx context.Context, topic, codec string, recs []record, idempotent bool) error {
	if idempotent {
		return na{"kafka-go has no idempotent producer"}
	}
	cc, err := kafkaGoCodec(codec)
	if err != nil {
		return err
	}
	w := &kafka.Writer{Addr: kafka.TCP(c.bootstrap), Transport: c.transport, Topic: topic, Balancer: keyBalancer, Compression: cc,
		BatchSize: 500, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	return w.WriteMessages(ctx, toKafkaGo(recs)...)
}

func (c *kafkaGoClient) consume(ctx context.Context, topic string, partition int32, n int, readCommitted bool) ([]record, error) {
	iso := kafka.ReadUncommitted
	if readCommitted {
		iso = kafka.ReadCommitted
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.bootstrap}, Dialer: c.dialer, Topic: topic, Partition: int(partition),
		MaxBytes: 10 << 20, IsolationLevel: iso, MaxWait: 500 * time.Millisecond})
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		return nil, err
	}
	var out []record
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return out, fmt.Errorf("after %d records: %w", len(out), err)
		}
		out = append(out, fromKafkaGo(m))
	}
	return out, nil
}

func (c *kafkaGoClient) offsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	var req kafka.OffsetRequest
	switch ts {
	case -2:
		req = kafka.FirstOffsetOf(int(partition))
	case -1:
		req = kafka.LastOffsetOf(int(partition))
	default:
		req = kafka.TimeOffsetOf(int(partition), time.UnixMilli(ts))
	}
	resp, err := c.cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {req}}})
	if err != nil {
		return 0, err
	}
	for _, po := range resp.Topics[topic] {
		if po.Partition != int(partition) {
			continue
		}
		if po.Error != nil {
			return 0, po.Error
		}
		switch ts {
		case -2:
			return po.FirstOffset, nil
		case -1:
			return po.LastOffset, nil
		}
		if len(po.Offsets) != 1 {
			return 0, fmt.Errorf("%d offsets in the answer, want 1: %v", len(po.Offsets), po)
		}
		for o := range po.Offsets {
			return o, nil
		}
	}
	return 0, errors.New("partition missing from the answer")
}

func (c *kafkaGoClient) describeConfigs(ctx context.Context, topic string) (map[string]string, error) {
	resp, err := c.cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic}}})
	if err != nil {
		return nil, err
	}
	if len(resp.Resources) != 1 {
		return nil, fmt.Errorf("%d resources in the answer", len(resp.Resources))
	}
	if resp.Resources[0].Error != nil {
		return nil, resp.Resources[0].Error
	}
	out := map[string]string{}
	for _, e := range resp.Resources[0].ConfigEntries {
		out[e.ConfigName] = e.ConfigValue
	}
	return out, nil
}

func (c *kafkaGoClient) alterConfig(ctx context.Context, topic, key, value string) error {
	resp, err := c.cl.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
		Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: key, Value: value, ConfigOperation: kafka.ConfigOperationSet}}}}})
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return r.Error
		}
	}
	return nil
}

func (c *kafkaGoClient) deleteTopic(ctx context.Context, topic string) error {
	resp, err := c.cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err != nil {
		return err
	}
	return resp.Errors[topic]
}

// kafkaGoMember is a group Reader read by a goroutine; commit commits
// what poll returned.
type kafkaGoMember struct {
	r       *kafka.Reader
	msgs    chan kafka.Message
	errs    chan error
	cancel  context.CancelFunc
	done    chan struct{}
	pending []kafka.Message
}

func (c *kafkaGoClient) newMember(ctx context.Context, topic, group string) (member, error) {
	if opts.kip848 {
		return nil, na{"kafka-go has no KIP-848 consumer"}
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.bootstrap}, Dialer: c.dialer, Topic: topic, GroupID: group,
		StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond, HeartbeatInterval: time.Second,
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second, JoinGroupBackoff: 200 * time.Millisecond})
	rctx, cancel := context.WithCancel(context.Background())
	m := &kafkaGoMember{r: r, msgs: make(chan kafka.Message, 10000), errs: make(chan error, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			msg, err := r.FetchMessage(rctx)
			if err != nil {
				if rctx.Err() == nil {
					m.errs <- err
				}
				return
			}
			m.msgs <- msg
		}
	}()
	return m, nil
}

func (m *kafkaGoMember) poll(ctx context.Context, d time.Duration) ([]record, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	var out []record
	for {
		select {
		case msg := <-m.msgs:
			m.pending = append(m.pending, msg)
			out = append(out, fromKafkaGo(msg))
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

func (m *kafkaGoMember) commit(ctx context.Context) error {
	if len(m.pending) == 0 {
		return nil
	}
	err := m.r.CommitMessages(ctx, m.pending...)
	m.pending = nil
	return err
}

func (m *kafkaGoMember) close() error {
	m.cancel()
	err := m.r.Close()
	<-m.done
	return err
}

func (c *kafkaGoClient) newTxnProducer(ctx context.Context, topic, txnID string) (txnProducer, error) {
	return nil, na{"kafka-go has no transactional producer"}
}

func (c *kafkaGoClient) consumeFrom(ctx context.Context, topic string, partition int32, fn func(record) (bool, error)) error {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.bootstrap}, Dialer: c.dialer, Topic: topic, Partition: int(partition),
		MaxBytes: 10 << 20, MaxWait: 500 * time.Millisecond})
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		return err
	}
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return err
		}
		if stop, err := fn(fromKafkaGo(m)); stop || err != nil {
			return err
		}
	}
}
