package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Topic counts the traffic of one topic on this broker, as Kafka's
// BrokerTopicMetrics MBean with a topic tag. Its methods are safe for
// concurrent use and do nothing on a nil *Topic.
type Topic struct {
	name string
	refs int // hosted partitions holding it; guarded by Topics.mu

	bytesIn, messagesIn, bytesOut                        atomic.Int64
	totalProduce, failedProduce, totalFetch, failedFetch atomic.Int64
	bytesRejected                                        atomic.Int64
	replicationBytesIn, replicationBytesOut              atomic.Int64
}

// Produced counts one partition of a Produce request (Kafka's
// TotalProduceRequestsPerSec): an append of bytes and messages records, or
// a failure when failed (FailedProduceRequestsPerSec; the broker decides
// which errors count, as Kafka's ReplicaManager does).
func (t *Topic) Produced(bytes, messages int64, failed bool) {
	if t == nil {
		return
	}
	t.totalProduce.Add(1)
	if failed {
		t.failedProduce.Add(1)
		t.bytesRejected.Add(bytes)
		return
	}
	t.bytesIn.Add(bytes)
	t.messagesIn.Add(messages)
}

// Fetched counts one partition of a Fetch request (TotalFetchRequestsPerSec)
// that sent bytes of records to a consumer (BytesOutPerSec) or to a
// follower (ReplicationBytesOutPerSec), or failed.
func (t *Topic) Fetched(bytes int64, follower, failed bool) {
	if t == nil {
		return
	}
	t.totalFetch.Add(1)
	if failed {
		t.failedFetch.Add(1)
	}
	if follower {
		t.replicationBytesOut.Add(bytes)
	} else {
		t.bytesOut.Add(bytes)
	}
}

// Replicated counts bytes of records a follower fetched from the leader and
// appended (ReplicationBytesInPerSec).
func (t *Topic) Replicated(bytes int64) {
	if t != nil && bytes > 0 {
		t.replicationBytesIn.Add(bytes)
	}
}

// topicCounts is a snapshot of a Topic's counters.
type topicCounts [10]int64

func (t *Topic) counts() topicCounts {
	return topicCounts{t.bytesIn.Load(), t.messagesIn.Load(), t.bytesOut.Load(), t.totalProduce.Load(),
		t.failedProduce.Load(), t.totalFetch.Load(), t.failedFetch.Load(), t.bytesRejected.Load(),
		t.replicationBytesIn.Load(), t.replicationBytesOut.Load()}
}

// Topics holds the Topic of each topic this broker hosts a partition of.
// A topic's counters go when its last partition goes (topic deleted or
// moved away), as Kafka removes a deleted topic's metrics; the totals
// without a topic label keep what it counted. Safe for concurrent use.
type Topics struct {
	mu      sync.Mutex // guards m and retired
	m       map[string]*Topic
	retired topicCounts
}

// NewTopics returns an empty Topics.
func NewTopics() *Topics { return &Topics{m: map[string]*Topic{}} }

// Acquire returns the Topic of name for one more hosted partition; pair it
// with Release. A nil *Topics returns nil.
func (ts *Topics) Acquire(name string) *Topic {
	if ts == nil {
		return nil
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[name]
	if t == nil {
		t = &Topic{name: name}
		ts.m[name] = t
	}
	t.refs++
	return t
}

// Release gives back a Topic from Acquire; the last release removes its
// per-topic series.
func (ts *Topics) Release(t *Topic) {
	if ts == nil || t == nil {
		return
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t.refs--
	if t.refs > 0 || ts.m[t.name] != t {
		return
	}
	delete(ts.m, t.name)
	c := t.counts()
	for i := range c {
		ts.retired[i] += c[i]
	}
}

// Totals are the bytes in (produced by clients) and out (fetched by
// consumers, followers excluded) of every topic this node has hosted since
// it started: the topic="" series of bytesin and bytesout. A nil *Topics
// returns zeros. O(hosted topics).
func (ts *Topics) Totals() (bytesIn, bytesOut int64) {
	if ts == nil {
		return 0, 0
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	all := ts.retired
	for _, t := range ts.m {
		c := t.counts()
		for i := range c {
			all[i] += c[i]
		}
	}
	return all[0], all[2]
}

// The BrokerTopicMetrics series, in topicCounts order.
var topicDescs = func() [10]*prometheus.Desc {
	names := [10]string{"bytesin", "messagesin", "bytesout", "totalproducerequests",
		"failedproducerequests", "totalfetchrequests", "failedfetchrequests", "bytesrejected",
		"replicationbytesin", "replicationbytesout"}
	help := [10]string{
		"Bytes of records appended from clients' Produce requests (Kafka's BytesInPerSec).",
		"Records appended from clients' Produce requests (MessagesInPerSec).",
		"Bytes of records sent to consumers, followers excluded (BytesOutPerSec).",
		"Partitions of Produce requests (TotalProduceRequestsPerSec).",
		"Partitions of Produce requests that failed validation or the append (FailedProduceRequestsPerSec).",
		"Partitions of Fetch requests, followers included (TotalFetchRequestsPerSec).",
		"Partitions of Fetch requests that failed with an unexpected error (FailedFetchRequestsPerSec).",
		"Bytes of records of failed Produce partitions (BytesRejectedPerSec).",
		"Bytes of records this broker's followers fetched and appended (ReplicationBytesInPerSec).",
		"Bytes of records sent to followers (ReplicationBytesOutPerSec).",
	}
	var out [10]*prometheus.Desc
	for i, n := range names {
		out[i] = prometheus.NewDesc("kafka_server_brokertopicmetrics_"+n+"_total", help[i], []string{"topic"}, nil)
	}
	return out
}()

// Describe implements prometheus.Collector.
func (ts *Topics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range topicDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one series per hosted topic
// with a topic label, and the totals of every topic with topic="" (the
// MBean without a topic tag, which Strimzi's dashboards exclude with
// topic!="").
func (ts *Topics) Collect(ch chan<- prometheus.Metric) {
	ts.mu.Lock()
	all := ts.retired
	type row struct {
		name string
		c    topicCounts
	}
	rows := make([]row, 0, len(ts.m))
	for name, t := range ts.m {
		c := t.counts()
		for i := range c {
			all[i] += c[i]
		}
		rows = append(rows, row{name, c})
	}
	ts.mu.Unlock()
	for _, r := range rows {
		for i, d := range topicDescs {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(r.c[i]), r.name)
		}
	}
	for i, d := range topicDescs {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(all[i]), "")
	}
}
