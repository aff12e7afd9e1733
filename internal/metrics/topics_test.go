package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTopics: per-topic counters live while a partition of the topic is
// hosted; the totals (topic="") keep what a released topic counted, so
// they never go backwards.
func TestTopics(t *testing.T) {
	ts := NewTopics()
	a0, a1, b := ts.Acquire("a"), ts.Acquire("a"), ts.Acquire("b")
	if a0 != a1 {
		t.Fatal("two partitions of a topic got different handles")
	}
	a0.Produced(100, 4, false)
	a1.Produced(50, 0, true)
	b.Produced(10, 1, false)
	b.Fetched(7, false, false)
	b.Fetched(1000, true, false) // a follower: a request, replication bytes out
	b.Replicated(300)
	check := func(want string) {
		t.Helper()
		if err := testutil.CollectAndCompare(ts, strings.NewReader(want), "kafka_server_brokertopicmetrics_bytesin_total", "kafka_server_brokertopicmetrics_bytesout_total", "kafka_server_brokertopicmetrics_totalfetchrequests_total", "kafka_server_brokertopicmetrics_replicationbytesout_total", "kafka_server_brokertopicmetrics_replicationbytesin_total"); err != nil {
			t.Error(err)
		}
	}
	check(`
# HELP kafka_server_brokertopicmetrics_bytesin_total Bytes of records appended from clients' Produce requests (Kafka's BytesInPerSec).
# TYPE kafka_server_brokertopicmetrics_bytesin_total counter
kafka_server_brokertopicmetrics_bytesin_total{topic=""} 110
kafka_server_brokertopicmetrics_bytesin_total{topic="a"} 100
kafka_server_brokertopicmetrics_bytesin_total{topic="b"} 10
# HELP kafka_server_brokertopicmetrics_bytesout_total Bytes of records sent to consumers, followers excluded (BytesOutPerSec).
# TYPE kafka_server_brokertopicmetrics_bytesout_total counter
kafka_server_brokertopicmetrics_bytesout_total{topic=""} 7
kafka_server_brokertopicmetrics_bytesout_total{topic="a"} 0
kafka_server_brokertopicmetrics_bytesout_total{topic="b"} 7
# HELP kafka_server_brokertopicmetrics_totalfetchrequests_total Partitions of Fetch requests, followers included (TotalFetchRequestsPerSec).
# TYPE kafka_server_brokertopicmetrics_totalfetchrequests_total counter
kafka_server_brokertopicmetrics_totalfetchrequests_total{topic=""} 2
kafka_server_brokertopicmetrics_totalfetchrequests_total{topic="a"} 0
kafka_server_brokertopicmetrics_totalfetchrequests_total{topic="b"} 2
# HELP kafka_server_brokertopicmetrics_replicationbytesin_total Bytes of records this broker's followers fetched and appended (ReplicationBytesInPerSec).
# TYPE kafka_server_brokertopicmetrics_replicationbytesin_total counter
kafka_server_brokertopicmetrics_replicationbytesin_total{topic=""} 300
kafka_server_brokertopicmetrics_replicationbytesin_total{topic="a"} 0
kafka_server_brokertopicmetrics_replicationbytesin_total{topic="b"} 300
# HELP kafka_server_brokertopicmetrics_replicationbytesout_total Bytes of records sent to followers (ReplicationBytesOutPerSec).
# TYPE kafka_server_brokertopicmetrics_replicationbytesout_total counter
kafka_server_brokertopicmetrics_replicationbytesout_total{topic=""} 1000
kafka_server_brokertopicmetrics_replicationbytesout_total{topic="a"} 0
kafka_server_brokertopicmetrics_replicationbytesout_total{topic="b"} 1000
`)
	ts.Release(a0)
	ts.Release(b)
	ts.Release(a1)
	check(`
# HELP kafka_server_brokertopicmetrics_bytesin_total Bytes of records appended from clients' Produce requests (Kafka's BytesInPerSec).
# TYPE kafka_server_brokertopicmetrics_bytesin_total counter
kafka_server_brokertopicmetrics_bytesin_total{topic=""} 110
# HELP kafka_server_brokertopicmetrics_bytesout_total Bytes of records sent to consumers, followers excluded (BytesOutPerSec).
# TYPE kafka_server_brokertopicmetrics_bytesout_total counter
kafka_server_brokertopicmetrics_bytesout_total{topic=""} 7
# HELP kafka_server_brokertopicmetrics_totalfetchrequests_total Partitions of Fetch requests, followers included (TotalFetchRequestsPerSec).
# TYPE kafka_server_brokertopicmetrics_totalfetchrequests_total counter
kafka_server_brokertopicmetrics_totalfetchrequests_total{topic=""} 2
# HELP kafka_server_brokertopicmetrics_replicationbytesin_total Bytes of records this broker's followers fetched and appended (ReplicationBytesInPerSec).
# TYPE kafka_server_brokertopicmetrics_replicationbytesin_total counter
kafka_server_brokertopicmetrics_replicationbytesin_total{topic=""} 300
# HELP kafka_server_brokertopicmetrics_replicationbytesout_total Bytes of records sent to followers (ReplicationBytesOutPerSec).
# TYPE kafka_server_brokertopicmetrics_replicationbytesout_total counter
kafka_server_brokertopicmetrics_replicationbytesout_total{topic=""} 1000
`)
	var nilTopic *Topic
	nilTopic.Produced(1, 1, false) // no panic
	_ = prometheus.Collector(ts)
}
