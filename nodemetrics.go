package samsa

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/samsahq/samsa/internal/broker"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/metrics"
	"github.com/samsahq/samsa/internal/quorum"
	"github.com/samsahq/samsa/internal/storage"
)

// nodeMetrics are the metrics objects of a node with an http.listener; the
// request paths hold them (a nil *nodeMetrics hands out nil, which count
// nothing).
type nodeMetrics struct {
	topics   *metrics.Topics
	requests *metrics.Requests
	storage  *storage.Stats
	flush    prometheus.Histogram
	quorum   quorumStats

	appendRate, fetchRate metrics.Rate
	commitLatency         latencyAvg
}

func newNodeMetrics() *nodeMetrics {
	m := &nodeMetrics{
		topics:   metrics.NewTopics(),
		requests: metrics.NewRequests(),
		flush: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "samsa_log_flush_seconds",
			Help:    "Duration of log flushes: the fsyncs of a partition's segments up to an offset (Kafka's LogFlushRateAndTimeMs).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	m.storage = &storage.Stats{FlushSeconds: m.flush}
	return m
}

func (m *nodeMetrics) topicStats() *metrics.Topics {
	if m == nil {
		return nil
	}
	return m.topics
}

func (m *nodeMetrics) requestStats() *metrics.Requests {
	if m == nil {
		return nil
	}
	return m.requests
}

func (m *nodeMetrics) storageStats() *storage.Stats {
	if m == nil {
		return nil
	}
	return m.storage
}

// quorumStats counts the metadata records this node's controller appended
// and the time their commits took.
type quorumStats struct {
	records, commits, commitNanos atomic.Int64
}

// latencyAvg is the mean of the commit latencies since the previous scrape
// (at least a second back), as Kafka's commit-latency-avg over its window.
type latencyAvg struct {
	rate  metrics.Rate // of nanoseconds
	count metrics.Rate // of commits
}

// timedLog is the metadata log with its appends counted (records and
// commit latency: Kafka's raft-metrics append-records-rate and
// commit-latency-avg).
type timedLog struct {
	quorum.Log
	s *quorumStats
}

func (l timedLog) Append(ctx context.Context, recs []metadata.Record) (int64, error) {
	start := time.Now()
	off, err := l.Log.Append(ctx, recs)
	if err == nil && len(recs) > 0 {
		l.s.records.Add(int64(len(recs)))
		l.s.commits.Add(1)
		l.s.commitNanos.Add(int64(time.Since(start)))
	}
	return off, err
}

// Describe passes quorum.Raft's Describe through (the active controller
// asks which voters answered it); errNoDescribe for another log.
func (l timedLog) Describe(ctx context.Context) (quorum.QuorumInfo, error) {
	if d, ok := l.Log.(interface {
		Describe(context.Context) (quorum.QuorumInfo, error)
	}); ok {
		return d.Describe(ctx)
	}
	return quorum.QuorumInfo{}, errNoDescribe
}

// errNoDescribe: the metadata log is not a raft voter (Local).
var errNoDescribe = errors.New("the metadata log does not describe its quorum")

// registry builds the node's registry: the broker's gauges once it
// serves, the per-topic and per-request metrics, storage, the metadata
// quorum and the listeners.
func (n *Node) registry(m *nodeMetrics, started <-chan struct{}) (*prometheus.Registry, error) {
	return metrics.NewRegistry(m.topics, m.requests, m.flush, metrics.DiskIO(), &nodeCollector{n: n, m: m, started: started})
}

// nodeCollector serves what the node as a whole knows: the broker's
// collector (once started), connections per listener, segment rolls and
// the metadata quorum's raft metrics.
type nodeCollector struct {
	n       *Node
	m       *nodeMetrics
	started <-chan struct{} // closed once the broker serves
}

var (
	descConnections  = prometheus.NewDesc("kafka_server_socket_server_metrics_connection_count", "Open connections on the listener (Kafka's socket-server-metrics connection-count).", []string{"listener"}, nil)
	descRolls        = prometheus.NewDesc("samsa_log_segment_rolls_total", "New active segments rolled by this node's logs (segment.bytes, segment.ms, a full index).", nil, nil)
	descRaftLeader   = prometheus.NewDesc("kafka_server_raftmetrics_current_leader", "Node id of the metadata quorum's leader as this node knows it, -1 unknown (raft-metrics current-leader).", nil, nil)
	descRaftEpoch    = prometheus.NewDesc("kafka_server_raftmetrics_current_epoch", "Epoch (raft term) of the metadata quorum (current-epoch).", nil, nil)
	descRaftVote     = prometheus.NewDesc("kafka_server_raftmetrics_current_vote", "Node id this voter voted for in the current epoch, -1 none (current-vote).", nil, nil)
	descRaftState    = prometheus.NewDesc("kafka_server_raftmetrics_current_state", "1 for this node's role in the metadata quorum: leader, follower, candidate (no leader known) or observer (current-state).", []string{"current_state"}, nil)
	descRaftHW       = prometheus.NewDesc("kafka_server_raftmetrics_high_watermark", "Committed end of the metadata log as this node knows it (high-watermark).", nil, nil)
	descRaftLEO      = prometheus.NewDesc("kafka_server_raftmetrics_log_end_offset", "End offset of this node's copy of the metadata log (log-end-offset).", nil, nil)
	descRaftAppend   = prometheus.NewDesc("kafka_server_raftmetrics_append_records_rate", "Metadata records per second this node's controller appended, since the previous scrape (append-records-rate).", nil, nil)
	descRaftFetch    = prometheus.NewDesc("kafka_server_raftmetrics_fetch_records_rate", "Metadata records per second replicated into this node's copy of the log while not leading, since the previous scrape (fetch-records-rate).", nil, nil)
	descRaftLatency  = prometheus.NewDesc("kafka_server_raftmetrics_commit_latency_avg", "Mean milliseconds from a metadata append to its commit, since the previous scrape (commit-latency-avg).", nil, nil)
	descSnapBytes    = prometheus.NewDesc("kafka_server_snapshotemitter_latestsnapshotgeneratedbytes", "Size in bytes of the newest metadata snapshot this node wrote, else of the one it loaded, else 0 (SnapshotEmitter LatestSnapshotGeneratedBytes).", nil, nil)
	descSnapAge      = prometheus.NewDesc("kafka_server_snapshotemitter_latestsnapshotgeneratedagems", "Milliseconds since this node wrote (or loaded) its newest metadata snapshot, else since its metadata log opened (SnapshotEmitter LatestSnapshotGeneratedAgeMs).", nil, nil)
	descSnapLoads    = prometheus.NewDesc("kafka_server_metadataloader_handleloadsnapshotcount", "Metadata snapshots loaded since the process started (MetadataLoader HandleLoadSnapshotCount).", nil, nil)
	descRaftLatencyS = prometheus.NewDesc("samsa_raft_commit_seconds_total", "Seconds metadata appends of this node's controller took to commit, in total (divide by samsa_raft_commits_total).", nil, nil)
	descRaftCommits  = prometheus.NewDesc("samsa_raft_commits_total", "Metadata appends of this node's controller that committed.", nil, nil)
	descPendingLogs  = prometheus.NewDesc("samsa_replica_pending_log_creations", "Partitions assigned to this broker whose logs its creators have not made yet: a Produce or Fetch naming one waits for its log; other requests get NOT_LEADER_OR_FOLLOWER.", nil, nil)

	descCleaner = func() map[string]*prometheus.Desc {
		out := map[string]*prometheus.Desc{}
		for name, help := range map[string]string{
			"runs":          "Cleanings of a log by the log cleaner that rewrote segments or advanced the cleaner checkpoint.",
			"failures":      "Cleanings that failed; the log stays uncleaned until the node restarts (Kafka's uncleanable partitions).",
			"bytes_read":    "Bytes of the segments the cleaner rewrote.",
			"bytes_written": "Bytes of the cleaned segments that replaced them.",
			"records_read":  "Records of the segments the cleaner rewrote.",
			"records_kept":  "Records the cleaner kept (the rest were superseded or deleted).",
			"seconds":       "Seconds the cleaner spent cleaning.",
		} {
			out[name] = prometheus.NewDesc("samsa_log_cleaner_"+name+"_total", help, nil, nil)
		}
		return out
	}()

	descRaftBytesIn  = prometheus.NewDesc("kafka_server_raftchannelmetrics_incoming_byte_total", "Bytes this voter read from raft connections of the other voters (raft-channel-metrics incoming-byte-total).", nil, nil)
	descRaftBytesOut = prometheus.NewDesc("kafka_server_raftchannelmetrics_outgoing_byte_total", "Bytes this voter wrote to raft connections (outgoing-byte-total).", nil, nil)
	descRaftMsgsOut  = prometheus.NewDesc("kafka_server_raftchannelmetrics_request_total", "Raft messages this voter sent (request-total; raft messages are not paired as Kafka's requests and responses).", nil, nil)
	descRaftMsgsIn   = prometheus.NewDesc("kafka_server_raftchannelmetrics_response_total", "Raft messages this voter received (response-total).", nil, nil)
)

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descCleaner {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{descConnections, descRolls, descRaftLeader, descRaftEpoch, descRaftVote, descRaftState, descRaftHW, descRaftLEO, descRaftAppend, descRaftFetch, descRaftLatency, descRaftLatencyS, descRaftCommits, descSnapBytes, descSnapAge, descSnapLoads, descRaftBytesIn, descRaftBytesOut, descRaftMsgsOut, descRaftMsgsIn, descPendingLogs} {
		ch <- d
	}
	// The broker's descriptions do not need a broker.
	(*broker.Broker)(nil).Collector().Describe(ch)
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n, m := c.n, c.m
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	conns := map[string]int{}
	for _, l := range n.listeners {
		conns[l.Name()] += l.Connections()
	}
	for name, v := range conns {
		g(descConnections, float64(v), name)
	}
	ch <- prometheus.MustNewConstMetric(descRolls, prometheus.CounterValue, float64(m.storage.Rolls.Load()))
	st := m.storage
	for name, v := range map[string]float64{
		"runs": float64(st.CleanerRuns.Load()), "failures": float64(st.CleanerFailures.Load()),
		"bytes_read": float64(st.CleanerBytesRead.Load()), "bytes_written": float64(st.CleanerBytesWritten.Load()),
		"records_read": float64(st.CleanerRecordsRead.Load()), "records_kept": float64(st.CleanerRecordsKept.Load()),
		"seconds": float64(st.CleanerNanos.Load()) / 1e9,
	} {
		ch <- prometheus.MustNewConstMetric(descCleaner[name], prometheus.CounterValue, v)
	}

	select {
	case <-c.started:
	default:
		return // the broker and quorum are still starting
	}
	n.broker.Collector().Collect(ch)
	if r := n.broker.Replicas(); r != nil && n.node.HasRole("broker") {
		g(descPendingLogs, float64(r.Pending()))
	}

	now := time.Now()
	lead := n.quorum.Leader()
	state := "candidate"
	var hw int64 = -1
	vote := int32(-1)
	switch {
	case n.raft != nil:
		hw, vote = n.raft.HighWatermark(), n.raft.Vote()
		if lead.LeaderID == n.node.NodeID {
			state = "leader"
		} else if lead.LeaderID >= 0 {
			state = "follower"
		}
	case n.observer != nil:
		hw, state = n.observer.HighWatermark(), "observer"
	default:
		state, vote = "leader", n.node.NodeID
	}
	leo := n.mlog.LogEndOffset()
	if hw < 0 {
		hw = leo
	}
	g(descRaftLeader, float64(lead.LeaderID))
	g(descRaftEpoch, float64(lead.Epoch))
	g(descRaftVote, float64(vote))
	g(descRaftState, 1, state)
	g(descRaftHW, float64(hw))
	g(descRaftLEO, float64(leo))
	g(descRaftAppend, m.appendRate.Update(now, m.quorum.records.Load()))
	fetched := int64(0)
	if state != "leader" {
		fetched = leo
	}
	g(descRaftFetch, max(m.fetchRate.Update(now, fetched), 0))
	nanos, commits := m.commitLatency.rate.Update(now, m.quorum.commitNanos.Load()), m.commitLatency.count.Update(now, m.quorum.commits.Load())
	avg := 0.0
	if commits > 0 {
		avg = nanos / commits / 1e6
	}
	g(descRaftLatency, avg)
	ch <- prometheus.MustNewConstMetric(descRaftLatencyS, prometheus.CounterValue, float64(m.quorum.commitNanos.Load())/1e9)
	ch <- prometheus.MustNewConstMetric(descRaftCommits, prometheus.CounterValue, float64(m.quorum.commits.Load()))
	if sn, ok := n.quorum.(quorum.Snapshots); ok {
		st := sn.SnapshotStats()
		g(descSnapBytes, float64(st.Bytes))
		g(descSnapAge, float64(now.Sub(st.Time).Milliseconds()))
		g(descSnapLoads, float64(st.Loads))
	}
	if n.transport != nil {
		st := n.transport.Stats()
		for _, c := range []struct {
			d *prometheus.Desc
			v int64
		}{{descRaftBytesIn, st.BytesIn.Load()}, {descRaftBytesOut, st.BytesOut.Load()}, {descRaftMsgsOut, st.MessagesOut.Load()}, {descRaftMsgsIn, st.MessagesIn.Load()}} {
			ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.v))
		}
	}
}

// ready is /readyz: the node started, knows the metadata quorum's leader,
// has applied the committed metadata log (its image is at most one batch
// behind the high-watermark it knows), and, with the broker role, is
// registered and unfenced.
func (n *Node) ready(started <-chan struct{}) error {
	select {
	case <-started:
	default:
		select {
		case <-n.logs.Loaded():
		default:
			return errors.New("loading the logs (recovering them after an unclean shutdown)")
		}
		if n.catchingUp.Load() {
			return errors.New("catching up with the metadata quorum (it needs a quorum of the controller.quorum.voters up)")
		}
		return errors.New("starting")
	}
	if n.raft != nil || n.observer != nil {
		if l := n.quorum.Leader(); l.LeaderID < 0 {
			return errors.New("no metadata quorum leader known")
		}
	}
	im := n.ctrl.Image()
	var hw int64 = -1
	switch {
	case n.raft != nil:
		hw = n.raft.HighWatermark()
	case n.observer != nil:
		hw = n.observer.HighWatermark()
	}
	if hw >= 0 && im.Offset+1 < hw && !n.caughtUpRecently(im.Offset) {
		return fmt.Errorf("metadata image at offset %d, behind the high-watermark %d", im.Offset, hw)
	}
	if n.node.HasRole("broker") {
		b := im.Broker(n.node.NodeID)
		switch {
		case b == nil:
			return errors.New("broker not registered")
		case b.Fenced:
			return errors.New("broker fenced")
		}
	}
	return nil
}

// caughtUpRecently allows an image one commit behind (a commit being
// applied as /readyz runs): it waits briefly for the image to pass offset.
func (n *Node) caughtUpRecently(offset int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return n.ctrl.WaitImage(ctx, func(im *metadata.Image) bool { return im.Offset > offset })
}

// HTTPAddr is the host:port of the node's http.listener (/metrics,
// /healthz, /readyz), "" when it has none.
func (n *Node) HTTPAddr() string {
	if n.http == nil {
		return ""
	}
	return n.http.Addr().String()
}
