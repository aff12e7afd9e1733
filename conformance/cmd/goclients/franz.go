package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type franzClient struct {
	bootstrap string
	sec       []kgo.Opt // TLS and SASL options, see franzSecurity
	cl        *kgo.Client
	adm       *kadm.Client
}

func newFranz(bootstrap string) (client, error) {
	so, err := franzSecurity()
	if err != nil {
		return nil, err
	}
	c := &franzClient{bootstrap: bootstrap, sec: so}
	if c.cl, err = kgo.NewClient(c.opts()...); err != nil {
		return nil, err
	}
	c.adm = kadm.NewClient(c.cl)
	return c, nil
}

// opts are the seed broker, the security options and extra.
func (c *franzClient) opts(extra ...kgo.Opt) []kgo.Opt {
	return append(append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap)}, c.sec...), extra...)
}

func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}

func (c *franzClient) version() string { return moduleVersion("github.com/twmb/franz-go") }
func (c *franzClient) close()          { c.cl.Close() }

func (c *franzClient) metadata(ctx context.Context, topic string) (int, []int32, error) {
	md, err := c.adm.Metadata(ctx) // all topics: a named one may be auto-created
	if err != nil {
		return 0, nil, err
	}
	t, ok := md.Topics[topic]
	if !ok || t.Err != nil {
		return len(md.Brokers), nil, nil
	}
	m := map[int32]int32{}
	for _, p := range t.Partitions {
		m[p.Partition] = p.Leader
	}
	return len(md.Brokers), sortedPartitions(m), nil
}

func (c *franzClient) createTopic(ctx context.Context, topic string, partitions int32) error {
	r, err := c.adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil {
		return err
	}
	return r.Err
}

func franzCodec(codec string) (kgo.CompressionCodec, error) {
	switch codec {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown codec %q", codec)
}

func toKgo(topic string, recs []record) []*kgo.Record {
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: topic, Partition: r.Partition, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
		}
		out[i] = kr
	}
	return out
}

func fromKgo(r *kgo.Record) record {
	out := record{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, header{h.Key, string(h.Value)})
	}
	return out
}

func (c *franzClient) produce(ctx context.Context, topic, codec string, recs []record, idempotent bool) error {
	cc, err := franzCodec(codec)
	if err != nil {
		return err
	}
	o := c.opts(kgo.ProducerBatchCompression(cc),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if !idempotent {
		o = append(o, kgo.DisableIdempotentWrite())
	}
	p, err := kgo.NewClient(o...)
	if err != nil {
		return err
	}
	defer p.Close()
	return p.ProduceSync(ctx, toKgo(topic, recs)...).FirstErr()
}

func (c *franzClient) consume(ctx context.Context, topic string, partition int32, n int, readCommitted bool) ([]record, error) {
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(c.opts(kgo.FetchIsolationLevel(iso),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("after %d records: %w", len(out), err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetch %s-%d: %w", t, p, err) })
		if ferr != nil {
			return out, ferr
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, fromKgo(r)) })
	}
	return out[:n], nil
}

func (c *franzClient) offsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	var (
		l   kadm.ListedOffsets
		err error
	)
	switch ts {
	case -2:
		l, err = c.adm.ListStartOffsets(ctx, topic)
	case -1:
		l, err = c.adm.ListEndOffsets(ctx, topic)
	default:
		l, err = c.adm.ListOffsetsAfterMilli(ctx, ts, topic)
	}
	if err != nil {
		return 0, err
	}
	o, ok := l.Lookup(topic, partition)
	if !ok {
		return 0, fmt.Errorf("no offset for partition %d", partition)
	}
	return o.Offset, o.Err
}

func (c *franzClient) describeConfigs(ctx context.Context, topic string) (map[string]string, error) {
	rcs, err := c.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, err
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return nil, err
	}
	if rc.Err != nil {
		return nil, rc.Err
	}
	out := map[string]string{}
	for _, cfg := range rc.Configs {
		out[cfg.Key] = cfg.MaybeValue()
	}
	return out, nil
}

func (c *franzClient) alterConfig(ctx context.Context, topic, key, value string) error {
	rs, err := c.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: &value}}, topic)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func (c *franzClient) deleteTopic(ctx context.Context, topic string) error {
	r, err := c.adm.DeleteTopic(ctx, topic)
	if err != nil {
		return err
	}
	return r.Err
}

type franzMember struct {
	cl *kgo.Client
}

func (c *franzClient) newMember(ctx context.Context, topic, group string) (member, error) {
	o := c.opts(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.CooperativeStickyBalancer()))
	if opts.kip848 {
		o = append(o, kgo.ServerSideBalancer()) // KIP-848, the "uniform" assignor
	} else {
		// The other runners' 10 s (franz-go's default 45 s): a killed
		// member's partitions move within group-crash's time.
		o = append(o, kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second))
	}
	cl, err := kgo.NewClient(o...)
	if err != nil {
		return nil, err
	}
	return &franzMember{cl: cl}, nil
}

func (m *franzMember) poll(ctx context.Context, d time.Duration) ([]record, error) {
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	fs := m.cl.PollFetches(pctx)
	var out []record
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		if err != context.DeadlineExceeded && err != context.Canceled {
			ferr = fmt.Errorf("fetch %s-%d: %w", t, p, err)
		}
	})
	fs.EachRecord(func(r *kgo.Record) { out = append(out, fromKgo(r)) })
	return out, ferr
}

func (m *franzMember) commit(ctx context.Context) error {
	return m.cl.CommitUncommittedOffsets(ctx)
}

func (m *franzMember) close() error {
	m.cl.Close() // leaves the group
	return nil
}

type franzTxn struct {
	cl *kgo.Client
}

func (c *franzClient) newTxnProducer(ctx context.Context, topic, txnID string) (txnProducer, error) {
	cl, err := kgo.NewClient(c.opts(kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return nil, err
	}
	return &franzTxn{cl: cl}, nil
}

func (t *franzTxn) begin() error { return t.cl.BeginTransaction() }
func (t *franzTxn) produce(ctx context.Context, recs []record) error {
	return t.cl.ProduceSync(ctx, toKgo("", recs)...).FirstErr()
}
func (t *franzTxn) commit(ctx context.Context) error { return t.cl.EndTransaction(ctx, kgo.TryCommit) }
func (t *franzTxn) abort(ctx context.Context) error  { return t.cl.EndTransaction(ctx, kgo.TryAbort) }
func (t *franzTxn) close()                           { t.cl.Close() }

func (c *franzClient) consumeFrom(ctx context.Context, topic string, partition int32, fn func(record) (bool, error)) error {
	cl, err := kgo.NewClient(c.opts(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetch %s-%d: %w", t, p, err) })
		if ferr != nil {
			return ferr
		}
		for _, r := range fs.Records() {
			if stop, err := fn(fromKgo(r)); stop || err != nil {
				return err
			}
		}
	}
}
