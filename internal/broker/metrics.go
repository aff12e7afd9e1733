package broker

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/wire"
)

// This file holds the broker's metrics: the counting hooks of the Produce
// and Fetch paths and the Collector of the gauges computed when scraped
// (one pass over the hosted partitions, one over the image on the active
// controller, one over the committed offsets on group coordinators). The
// names follow Strimzi's JMX exporter rules for Kafka's MBeans and, for
// topic offsets and consumer lag, kafka-exporter's; see docs/operations.md.

// countProduce counts one appended (or failed) partition of a Produce
// request in its topic's BrokerTopicMetrics. As Kafka's ReplicaManager, a
// partition this broker does not lead and records refused for their size,
// framing or a storage failure are not failed produce requests; validation
// and replication errors (INVALID_RECORD, NOT_ENOUGH_REPLICAS, sequence
// and epoch errors, ...) are.
func countProduce(p *replica.Partition, bytes int, res storage.AppendResult, err error) {
	if p.Stats == nil {
		return
	}
	if err != nil {
		switch errCode(err) {
		case kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.FencedLeaderEpoch.Code,
			kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.CorruptMessage.Code,
			kerr.KafkaStorageError.Code, kerr.UnknownServerError.Code:
			p.Stats.Produced(0, 0, false)
		default:
			p.Stats.Produced(int64(bytes), 0, true)
		}
		return
	}
	if res.Duplicate {
		p.Stats.Produced(0, 0, false)
		return
	}
	p.Stats.Produced(int64(bytes), res.LastOffset-res.BaseOffset+1, false)
}

// fetchAcct keeps what one pass of a Fetch read, so that only the pass
// whose response is sent is counted (a long poll reads several times).
type fetchAcct struct {
	parts []fetchedPart
}

type fetchedPart struct {
	p      *replica.Partition
	bytes  int64
	failed bool
}

func (a *fetchAcct) reset() { a.parts = a.parts[:0] }

func (a *fetchAcct) add(p *replica.Partition, bytes int64, err error) {
	if p.Stats == nil {
		return
	}
	// As Kafka's ReplicaManager.readFromLog, the expected errors (offset
	// out of range, fenced or unknown epochs) are not failed fetches.
	failed := false
	if err != nil {
		c := errCode(err)
		failed = c == kerr.KafkaStorageError.Code || c == kerr.UnknownServerError.Code
	}
	a.parts = append(a.parts, fetchedPart{p, bytes, failed})
}

func (a *fetchAcct) count(follower bool) {
	for _, f := range a.parts {
		f.p.Stats.Fetched(f.bytes, follower, f.failed)
	}
}

// Collector returns the broker's scrape-time metrics (replica manager,
// partitions, logs, controller, topic offsets and consumer lag).
func (b *Broker) Collector() prometheus.Collector { return brokerCollector{b} }

type brokerCollector struct{ b *Broker }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	tp = []string{"topic", "partition"}

	descPartitionCount   = desc("kafka_server_replicamanager_partitioncount", "Partitions hosted by this broker, as leader or follower (Kafka's ReplicaManager PartitionCount).")
	descLeaderCount      = desc("kafka_server_replicamanager_leadercount", "Partitions this broker leads (LeaderCount).")
	descURP              = desc("kafka_server_replicamanager_underreplicatedpartitions", "Partitions this broker leads whose ISR is smaller than their replica set (UnderReplicatedPartitions).")
	descUnderMinISRCount = desc("kafka_server_replicamanager_underminisrpartitioncount", "Partitions this broker leads whose ISR is smaller than min.insync.replicas: acks=all produces fail (UnderMinIsrPartitionCount).")
	descAtMinISRCount    = desc("kafka_server_replicamanager_atminisrpartitioncount", "Partitions this broker leads whose ISR is exactly min.insync.replicas: one more failure stops acks=all produces (AtMinIsrPartitionCount).")
	descISRShrinks       = desc("kafka_server_replicamanager_isrshrinks_total", "ISR shrinks of partitions this broker leads, committed by the controller (IsrShrinksPerSec).")
	descOfflineReplicas  = desc("kafka_server_replicamanager_offlinereplicacount", "Replicas assigned to this broker whose log it could not open or create, answered KAFKA_STORAGE_ERROR and reported lost to the controller (OfflineReplicaCount).")
	descISRExpands       = desc("kafka_server_replicamanager_isrexpands_total", "ISR expansions of partitions this broker leads, committed by the controller (IsrExpandsPerSec).")

	descPartURP         = desc("kafka_cluster_partition_underreplicated", "1 when the partition (led by this broker) has fewer in-sync replicas than replicas (Kafka's Partition UnderReplicated).", tp...)
	descPartUnderMinISR = desc("kafka_cluster_partition_underminisr", "1 when the partition (led by this broker) has fewer in-sync replicas than min.insync.replicas (UnderMinIsr).", tp...)
	descPartAtMinISR    = desc("kafka_cluster_partition_atminisr", "1 when the partition (led by this broker) has exactly min.insync.replicas in-sync replicas (AtMinIsr).", tp...)
	descPartReplicas    = desc("kafka_cluster_partition_replicascount", "Replicas of the partition led by this broker (ReplicasCount).", tp...)
	descPartISR         = desc("kafka_cluster_partition_insyncreplicascount", "In-sync replicas of the partition led by this broker (InSyncReplicasCount).", tp...)
	descPartLSOLag      = desc("kafka_cluster_partition_laststableoffsetlag", "High-watermark minus last stable offset of the partition led by this broker: records of open transactions (LastStableOffsetLag).", tp...)

	descLogSize     = desc("kafka_log_log_size", "Bytes of the partition's log segments on this broker (Kafka's Log Size).", tp...)
	descLogEnd      = desc("kafka_log_log_logendoffset", "Log end offset of the partition's replica on this broker (LogEndOffset).", tp...)
	descLogStart    = desc("kafka_log_log_logstartoffset", "Log start offset of the partition's replica on this broker (LogStartOffset).", tp...)
	descLogSegments = desc("kafka_log_log_numlogsegments", "Segments of the partition's log on this broker (NumLogSegments).", tp...)
	descOfflineDirs = desc("kafka_log_logmanager_offlinelogdirectorycount", "Log dirs of this broker that an I/O error took offline until restart (Kafka's LogManager OfflineLogDirectoryCount).")

	descActiveController = desc("kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller, 0 on other controllers (ActiveControllerCount); the cluster's sum should be 1.")
	descOffline          = desc("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader, on the active controller (OfflinePartitionsCount); 0 elsewhere.")
	descGlobalTopics     = desc("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the metadata image, on the active controller (GlobalTopicCount); 0 elsewhere.")
	descGlobalPartitions = desc("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the metadata image, on the active controller (GlobalPartitionCount); 0 elsewhere.")
	descActiveBrokers    = desc("kafka_controller_kafkacontroller_activebrokercount", "Registered unfenced brokers, on the active controller (ActiveBrokerCount); 0 elsewhere.")
	descFencedBrokers    = desc("kafka_controller_kafkacontroller_fencedbrokercount", "Registered fenced brokers, on the active controller (FencedBrokerCount); 0 elsewhere.")
	descImbalance        = desc("kafka_controller_kafkacontroller_preferredreplicaimbalancecount", "Partitions whose leader is not their preferred (first) replica, on the active controller (PreferredReplicaImbalanceCount); 0 elsewhere.")
	descUnclean          = desc("kafka_controller_controllerstats_uncleanleaderelections_total", "Leaders this node's controller chose outside the ISR (UncleanLeaderElectionsPerSec).")

	descBrokerInfo          = desc("kafka_broker_info", "Always 1: this broker's id and first advertised address, as kafka-exporter's kafka_broker_info.", "id", "address")
	descTopicPartitions     = desc("kafka_topic_partitions", "Partitions of the topic, served by the leader of its partition 0 (kafka-exporter).", "topic")
	descTPCurrentOffset     = desc("kafka_topic_partition_current_offset", "High-watermark (newest offset) of the partition, served by its leader (kafka-exporter).", tp...)
	descTPOldestOffset      = desc("kafka_topic_partition_oldest_offset", "Log start offset of the partition, served by its leader (kafka-exporter).", tp...)
	descTPReplicas          = desc("kafka_topic_partition_replicas", "Replicas of the partition, served by its leader (kafka-exporter).", tp...)
	descTPInSync            = desc("kafka_topic_partition_in_sync_replica", "In-sync replicas of the partition, served by its leader (kafka-exporter).", tp...)
	descTPUnderReplicated   = desc("kafka_topic_partition_under_replicated_partition", "1 when the partition is under-replicated, served by its leader (kafka-exporter).", tp...)
	descTPLeaderIsPreferred = desc("kafka_topic_partition_leader_is_preferred", "1 when the leader is the preferred (first) replica, served by the leader (kafka-exporter).", tp...)
	descTPLeader            = desc("kafka_topic_partition_leader", "Leader id of the partition, served by its leader (kafka-exporter).", tp...)
	descCGCurrentOffset     = desc("kafka_consumergroup_current_offset", "Committed offset of the group on the partition, served by the group's coordinator (kafka-exporter).", "consumergroup", "topic", "partition")
	descCGLag               = desc("kafka_consumergroup_lag", "High-watermark minus committed offset of the group on the partition, served by the group's coordinator (kafka-exporter).", "consumergroup", "topic", "partition")
	descCGCurrentOffsetSum  = desc("kafka_consumergroup_current_offset_sum", "Sum of the group's committed offsets on the topic (kafka-exporter).", "consumergroup", "topic")
	descCGLagSum            = desc("kafka_consumergroup_lag_sum", "Sum of the group's lag on the topic (kafka-exporter).", "consumergroup", "topic")
	descCGTruncated         = desc("samsa_consumergroup_lag_truncated", "1 when more committed offsets exist than samsa.metrics.consumer.lag.max.series and some were left out of the lag series.")
)

var brokerDescs = []*prometheus.Desc{
	descPartitionCount, descLeaderCount, descURP, descUnderMinISRCount, descAtMinISRCount, descISRShrinks, descISRExpands,
	descPartURP, descPartUnderMinISR, descPartAtMinISR, descPartReplicas, descPartISR, descPartLSOLag,
	descLogSize, descLogEnd, descLogStart, descLogSegments, descOfflineDirs, descOfflineReplicas,
	descActiveController, descOffline, descGlobalTopics, descGlobalPartitions, descActiveBrokers, descFencedBrokers, descImbalance, descUnclean,
	descBrokerInfo, descTopicPartitions, descTPCurrentOffset, descTPOldestOffset, descTPReplicas, descTPInSync, descTPUnderReplicated,
	descTPLeaderIsPreferred, descTPLeader, descCGCurrentOffset, descCGLag, descCGCurrentOffsetSum, descCGLagSum, descCGTruncated,
}

func (c brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range brokerDescs {
		ch <- d
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// PartitionHealth is what the replica manager's gauges count of one led
// partition: the ISR against the replica set and min.insync.replicas, as
// Kafka's Partition.isUnderReplicated, isUnderMinIsr and isAtMinIsr.
type PartitionHealth struct {
	UnderReplicated, UnderMinISR, AtMinISR bool
}

// partitionHealth judges a partition led with isr in-sync replicas of
// replicas, under min.insync.replicas minISR.
func partitionHealth(isr, replicas, minISR int) PartitionHealth {
	return PartitionHealth{
		UnderReplicated: isr < replicas,
		UnderMinISR:     isr < minISR,
		AtMinISR:        isr == minISR,
	}
}

func (c brokerCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	im := b.image()
	isBroker := b.node.HasRole("broker")
	if isBroker {
		c.collectPartitions(ch)
		if b.logs != nil {
			gauge(ch, descOfflineDirs, float64(len(b.logs.OfflineDirIDs())))
		}
		gauge(ch, descOfflineReplicas, float64(b.replicas.OfflineCount()))
		if len(b.endpoints) > 0 {
			ep := b.endpoints[0]
			gauge(ch, descBrokerInfo, 1, strconv.Itoa(int(b.node.NodeID)), ep.Host+":"+strconv.Itoa(int(ep.Port)))
		}
		for _, name := range im.TopicNames() {
			if !b.node.MetricsPartitionSeries {
				break
			}
			t := im.Topic(name)
			if len(t.Partitions) > 0 && t.Partitions[0].Leader == b.node.NodeID {
				gauge(ch, descTopicPartitions, float64(len(t.Partitions)), name)
			}
		}
		c.collectLag(ch)
	}
	if b.node.HasRole("controller") {
		active := b.ctrl.Active()
		gauge(ch, descActiveController, b2f(active))
		var offline, topics, parts, activeBrokers, fenced, imbalance int
		if active {
			for _, name := range im.TopicNames() {
				t := im.Topic(name)
				topics++
				for _, p := range t.Partitions {
					parts++
					if p.Leader < 0 {
						offline++
					} else if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
						imbalance++
					}
				}
			}
			for _, br := range im.Brokers() {
				if br.Fenced {
					fenced++
				} else {
					activeBrokers++
				}
			}
		}
		gauge(ch, descOffline, float64(offline))
		gauge(ch, descGlobalTopics, float64(topics))
		gauge(ch, descGlobalPartitions, float64(parts))
		gauge(ch, descActiveBrokers, float64(activeBrokers))
		gauge(ch, descFencedBrokers, float64(fenced))
		gauge(ch, descImbalance, float64(imbalance))
		counter(ch, descUnclean, float64(b.ctrl.UncleanElections.Load()))
	}
}

// collectPartitions is one pass over the hosted partitions.
func (c brokerCollector) collectPartitions(ch chan<- prometheus.Metric) {
	b := c.b
	var count, leaders, urp, underMin, atMin int
	perPartition := b.node.MetricsPartitionSeries
	for _, p := range b.replicas.Partitions() {
		count++
		var part string
		if perPartition {
			part = strconv.Itoa(int(p.Partition))
			log := p.Log()
			gauge(ch, descLogSize, float64(log.Size()), p.Topic, part)
			gauge(ch, descLogEnd, float64(log.LogEndOffset()), p.Topic, part)
			gauge(ch, descLogStart, float64(log.LogStartOffset()), p.Topic, part)
			gauge(ch, descLogSegments, float64(len(log.Segments())), p.Topic, part)
		}
		if !p.IsLeader() {
			continue
		}
		leaders++
		isr, replicas := len(p.ISR()), p.ReplicaCount()
		h := partitionHealth(isr, replicas, int(p.Config().MinInsyncReplicas))
		if h.UnderReplicated {
			urp++
		}
		if h.UnderMinISR {
			underMin++
		}
		if h.AtMinISR {
			atMin++
		}
		if !perPartition {
			continue
		}
		hw := p.HighWatermark()
		gauge(ch, descPartURP, b2f(h.UnderReplicated), p.Topic, part)
		gauge(ch, descPartUnderMinISR, b2f(h.UnderMinISR), p.Topic, part)
		gauge(ch, descPartAtMinISR, b2f(h.AtMinISR), p.Topic, part)
		gauge(ch, descPartReplicas, float64(replicas), p.Topic, part)
		gauge(ch, descPartISR, float64(isr), p.Topic, part)
		gauge(ch, descPartLSOLag, float64(hw-p.LastStableOffset()), p.Topic, part)
		gauge(ch, descTPCurrentOffset, float64(hw), p.Topic, part)
		gauge(ch, descTPOldestOffset, float64(p.LogStartOffset()), p.Topic, part)
		gauge(ch, descTPReplicas, float64(replicas), p.Topic, part)
		gauge(ch, descTPInSync, float64(isr), p.Topic, part)
		gauge(ch, descTPUnderReplicated, b2f(h.UnderReplicated), p.Topic, part)
		gauge(ch, descTPLeaderIsPreferred, b2f(p.PreferredLeader() == b.node.NodeID), p.Topic, part)
		gauge(ch, descTPLeader, float64(b.node.NodeID), p.Topic, part)
	}
	gauge(ch, descPartitionCount, float64(count))
	gauge(ch, descLeaderCount, float64(leaders))
	gauge(ch, descURP, float64(urp))
	gauge(ch, descUnderMinISRCount, float64(underMin))
	gauge(ch, descAtMinISRCount, float64(atMin))
	counter(ch, descISRShrinks, float64(b.replicas.ISRShrinks.Load()))
	counter(ch, descISRExpands, float64(b.replicas.ISRExpands.Load()))
}

// collectLag serves the committed offsets of the groups this broker
// coordinates and their lag against the partitions' high-watermarks, as
// kafka-exporter computes it. The high-watermark comes from this broker's
// replica of the partition (a follower's trails the leader's by at most a
// fetch) or, for partitions it does not host, from their leaders: one
// ListOffsets (latest, read_uncommitted) per leader, concurrently, within
// two seconds; a partition whose leader does not answer has no lag series
// in this scrape. At most samsa.metrics.consumer.lag.max.series offsets are
// served.
func (c brokerCollector) collectLag(ch chan<- prometheus.Metric) {
	b := c.b
	limit := int(b.node.MetricsConsumerLagMaxSeries)
	if limit <= 0 || b.groups == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, truncated, ok := b.groups.coord.CommittedOffsets(ctx, limit)
	if !ok {
		return
	}
	gauge(ch, descCGTruncated, b2f(truncated))
	hws := map[lagKey]int64{}
	for _, o := range offs {
		if o.Offset < 0 {
			continue
		}
		k := lagKey{o.Topic, o.Partition}
		if p := b.replicas.Get(o.Topic, o.Partition); p != nil {
			hws[k] = p.HighWatermark()
		} else if _, ok := hws[k]; !ok {
			hws[k] = -1 // ask its leader
		}
	}
	b.remoteHighWatermarks(ctx, hws)
	perPartition := b.node.MetricsConsumerLagPartitions
	type key struct{ group, topic string }
	var cur key
	var sumOff, sumLag int64
	flush := func() {
		if cur.group != "" {
			gauge(ch, descCGCurrentOffsetSum, float64(sumOff), cur.group, cur.topic)
			gauge(ch, descCGLagSum, float64(sumLag), cur.group, cur.topic)
		}
	}
	for _, o := range offs {
		hw, ok := hws[lagKey{o.Topic, o.Partition}]
		if o.Offset < 0 || !ok || hw < 0 {
			continue
		}
		lag := max(hw-o.Offset, 0)
		if k := (key{o.Group, o.Topic}); k != cur {
			flush()
			cur, sumOff, sumLag = k, 0, 0
		}
		sumOff += o.Offset
		sumLag += lag
		if perPartition {
			part := strconv.Itoa(int(o.Partition))
			gauge(ch, descCGCurrentOffset, float64(o.Offset), o.Group, o.Topic, part)
			gauge(ch, descCGLag, float64(lag), o.Group, o.Topic, part)
		}
	}
	flush()
}

// lagKey is a partition whose high-watermark the lag metrics need.
type lagKey struct {
	topic     string
	partition int32
}

// lagClients are the connections over which the lag metrics ask other
// leaders for high-watermarks, kept apart from the connections of
// transaction markers so that a scrape never queues behind them.
type lagClients struct {
	mu     sync.Mutex // guards m and closed
	m      map[string]*wire.Client
	closed bool
}

// get returns the client for addr, nil once closed.
func (lc *lagClients) get(addr, clientID string) *wire.Client {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		return nil
	}
	if lc.m == nil {
		lc.m = map[string]*wire.Client{}
	}
	c := lc.m[addr]
	if c == nil {
		c = wire.NewClient(addr, clientID, 16<<20)
		lc.m[addr] = c
	}
	return c
}

func (lc *lagClients) close() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for _, c := range lc.m {
		c.Close()
	}
	lc.m, lc.closed = nil, true
}

// remoteHighWatermarks fills the entries of hws that are -1 with the
// high-watermarks their leaders report (ListOffsets v4, latest offset,
// read_uncommitted: what kafka-exporter asks), one request per leader, all
// at once; entries whose leader is unknown or does not answer stay -1.
func (b *Broker) remoteHighWatermarks(ctx context.Context, hws map[lagKey]int64) {
	im := b.image()
	byLeader := map[int32][]lagKey{}
	for k, hw := range hws {
		if hw >= 0 {
			continue
		}
		t := im.Topic(k.topic)
		if t == nil || int(k.partition) >= len(t.Partitions) {
			continue
		}
		if l := t.Partitions[k.partition].Leader; l >= 0 && l != b.node.NodeID {
			byLeader[l] = append(byLeader[l], k)
		}
	}
	if len(byLeader) == 0 {
		return
	}
	type answer struct {
		k  lagKey
		hw int64
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	answers := make(chan []answer, len(byLeader))
	clientID := "samsa-metrics-" + strconv.Itoa(int(b.node.NodeID))
	for leader, keys := range byLeader {
		addr, ok := b.brokerAddr(leader)
		var c *wire.Client
		if ok {
			c = b.lag.get(addr, clientID)
		}
		if c == nil {
			answers <- nil
			continue
		}
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(4)
		req.ReplicaID = -1
		byTopic := map[string]int{}
		for _, k := range keys {
			i, ok := byTopic[k.topic]
			if !ok {
				i = len(req.Topics)
				byTopic[k.topic] = i
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = k.topic
				req.Topics = append(req.Topics, rt)
			}
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = k.partition, -1, -1
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		}
		go func() {
			var out []answer
			if resp, err := c.Request(ctx, req); err == nil {
				for _, rt := range resp.(*kmsg.ListOffsetsResponse).Topics {
					for _, rp := range rt.Partitions {
						if rp.ErrorCode == 0 {
							out = append(out, answer{lagKey{rt.Topic, rp.Partition}, rp.Offset})
						}
					}
				}
			}
			answers <- out
		}()
	}
	for range byLeader {
		for _, a := range <-answers {
			if _, ok := hws[a.k]; ok {
				hws[a.k] = a.hw
			}
		}
	}
}
