package console

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker is a row of the overview's node table.
type Broker struct {
	ID        int32  `json:"id"`
	Host      string `json:"host"`
	Port      int32  `json:"port"`
	Rack      string `json:"rack,omitempty"`
	Fenced    bool   `json:"fenced"`
	Broker    bool   `json:"broker"`
	Voter     bool   `json:"voter"`
	Active    bool   `json:"activeController"`
	QuorumLag int64  `json:"quorumLag"` // records behind the quorum leader; -1 unknown
}

// LogDir is a log directory's use.
type LogDir struct {
	Broker int32  `json:"broker"`
	Dir    string `json:"dir"`
	Bytes  int64  `json:"bytes"`       // of the partitions in it
	Total  int64  `json:"totalBytes"`  // of its volume, -1 unknown
	Usable int64  `json:"usableBytes"` // of its volume, -1 unknown
	Error  string `json:"error,omitempty"`
}

// Health counts partitions in trouble.
type Health struct {
	Partitions      int `json:"partitions"`
	UnderReplicated int `json:"underReplicated"`
	UnderMinISR     int `json:"underMinIsr"`
	Offline         int `json:"offline"`
}

// Overview is /api/overview.
type Overview struct {
	Version      string   `json:"version"`
	ClusterID    string   `json:"clusterId"`
	ControllerID int32    `json:"controllerId"`
	QuorumLeader int32    `json:"quorumLeader"`
	QuorumEpoch  int32    `json:"quorumEpoch"`
	Brokers      []Broker `json:"brokers"`
	Health       Health   `json:"health"`
	LogDirs      []LogDir `json:"logDirs"`
	Throughput   []point  `json:"throughput"` // A: bytes/s in, B: bytes/s out
	Errors       []string `json:"errors,omitempty"`
}

func (c *Console) overview(ctx context.Context, cl *kgo.Client) Overview {
	adm := kadm.NewClient(cl)
	o := Overview{Version: c.cfg.Version, ControllerID: -1, QuorumLeader: -1, Brokers: []Broker{}, LogDirs: []LogDir{}, Throughput: c.throughput.points()}
	fail := func(what string, err error) { o.Errors = append(o.Errors, what+": "+err.Error()) }
	byID := map[int32]*Broker{}
	get := func(id int32) *Broker {
		if b := byID[id]; b != nil {
			return b
		}
		b := &Broker{ID: id, QuorumLag: -1}
		byID[id] = b
		return b
	}
	dreq := kmsg.NewPtrDescribeClusterRequest()
	dreq.IncludeFencedBrokers = true
	if dresp, err := dreq.RequestWith(ctx, cl); err != nil {
		fail("DescribeCluster", err)
	} else if err := kerr.ErrorForCode(dresp.ErrorCode); err != nil {
		fail("DescribeCluster", err)
	} else {
		o.ClusterID, o.ControllerID = dresp.ClusterID, dresp.ControllerID
		for _, rb := range dresp.Brokers {
			b := get(rb.NodeID)
			b.Host, b.Port, b.Fenced, b.Broker = rb.Host, rb.Port, rb.IsFenced, true
			if rb.Rack != nil {
				b.Rack = *rb.Rack
			}
		}
	}
	qreq := kmsg.NewPtrDescribeQuorumRequest()
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic = "__cluster_metadata"
	qt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
	qreq.Topics = append(qreq.Topics, qt)
	if qresp, err := qreq.RequestWith(ctx, cl); err != nil {
		fail("DescribeQuorum", err)
	} else if err := kerr.ErrorForCode(qresp.ErrorCode); err != nil {
		fail("DescribeQuorum", err)
	} else if len(qresp.Topics) == 1 && len(qresp.Topics[0].Partitions) == 1 {
		p := qresp.Topics[0].Partitions[0]
		o.QuorumLeader, o.QuorumEpoch = p.LeaderID, p.LeaderEpoch
		var hw int64 = -1
		for _, v := range p.CurrentVoters {
			if v.ReplicaID == p.LeaderID {
				hw = v.LogEndOffset
			}
		}
		for _, v := range p.CurrentVoters {
			b := get(v.ReplicaID)
			b.Voter = true
			b.Active = v.ReplicaID == p.LeaderID
			if hw >= 0 && v.LogEndOffset >= 0 {
				b.QuorumLag = max(hw-v.LogEndOffset, 0)
			}
		}
		for _, n := range qresp.Nodes {
			b := get(n.NodeID)
			if b.Host == "" && len(n.Listeners) > 0 {
				b.Host, b.Port = n.Listeners[0].Host, int32(n.Listeners[0].Port)
			}
		}
	}
	for _, b := range byID {
		o.Brokers = append(o.Brokers, *b)
	}
	sort.Slice(o.Brokers, func(i, j int) bool { return o.Brokers[i].ID < o.Brokers[j].ID })

	h, err := health(ctx, adm)
	if err != nil {
		fail("Metadata", err)
	}
	o.Health = h
	// A broker that does not answer (stopped, or fenced and so unknown to
	// the client) gets a row of unknown sizes, not an error over the page.
	dirs, _ := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{})
	for _, b := range o.Brokers {
		if _, ok := dirs[b.ID]; b.Broker && !ok {
			o.LogDirs = append(o.LogDirs, LogDir{Broker: b.ID, Bytes: -1, Total: -1, Usable: -1, Error: "no answer"})
		}
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		ld := LogDir{Broker: d.Broker, Dir: d.Dir, Bytes: d.Size(), Total: d.TotalBytes, Usable: d.UsableBytes}
		if d.Err != nil {
			ld.Error = d.Err.Error()
		}
		o.LogDirs = append(o.LogDirs, ld)
	})
	sort.Slice(o.LogDirs, func(i, j int) bool {
		a, b := o.LogDirs[i], o.LogDirs[j]
		return a.Broker < b.Broker || a.Broker == b.Broker && a.Dir < b.Dir
	})
	return o
}

// health counts partitions in trouble from one Metadata request; the
// topics with a partition whose ISR is short get their min.insync.replicas
// described (work proportional to the troubled topics).
func health(ctx context.Context, adm *kadm.Client) (Health, error) {
	var h Health
	md, err := adm.Metadata(ctx)
	if err != nil {
		return h, err
	}
	short := map[string][]int{} // topic: ISR sizes of its short partitions
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			h.Partitions++
			if p.Leader < 0 || p.Err == kerr.LeaderNotAvailable {
				h.Offline++
			}
			if len(p.ISR) < len(p.Replicas) {
				h.UnderReplicated++
				short[t.Topic] = append(short[t.Topic], len(p.ISR))
			}
		}
	}
	if len(short) == 0 {
		return h, nil
	}
	names := make([]string, 0, len(short))
	for t := range short {
		names = append(names, t)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return h, err
	}
	for _, rc := range rcs {
		min := 1
		for _, cfg := range rc.Configs {
			if cfg.Key == "min.insync.replicas" && cfg.Value != nil {
				min = atoiOr(*cfg.Value, 1)
			}
		}
		for _, n := range short[rc.Name] {
			if n < min {
				h.UnderMinISR++
			}
		}
	}
	return h, nil
}

// TopicRow is a row of the topic list.
type TopicRow struct {
	Name        string  `json:"name"`
	Partitions  int     `json:"partitions"`
	RF          int     `json:"replicationFactor"`
	Internal    bool    `json:"internal"`
	Bytes       int64   `json:"bytes"`          // of every replica's log
	MessagesSec float64 `json:"messagesPerSec"` // over the last minute, from offsets
}

// Page is a page of a list.
type Page[T any] struct {
	Items []T    `json:"items"` // never nil: [] when empty
	Total int    `json:"total"` // matching the query
	Page  int    `json:"page"`  // from 0
	Size  int    `json:"size"`
	Query string `json:"query,omitempty"`
}

// topics lists the page of topics whose name contains q. The names come
// from one Metadata request; sizes and rates are asked for the page only.
func topics(ctx context.Context, adm *kadm.Client, q string, page, size int) (Page[TopicRow], error) {
	out := Page[TopicRow]{Items: []TopicRow{}, Page: page, Size: size, Query: q}
	td, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return out, err
	}
	var rows []TopicRow
	for _, t := range td.Sorted() {
		if q != "" && !strings.Contains(t.Topic, q) {
			continue
		}
		rows = append(rows, TopicRow{Name: t.Topic, Partitions: len(t.Partitions), RF: t.Partitions.NumReplicas(), Internal: t.IsInternal})
	}
	out.Total = len(rows)
	rows = pageOf(rows, page, size)
	if len(rows) == 0 {
		return out, nil
	}
	all := td.TopicsSet()
	page1 := kadm.TopicsSet{}
	var names []string
	for _, r := range rows {
		page1[r.Name] = all[r.Name]
		names = append(names, r.Name)
	}
	sizes := map[string]int64{}
	if dirs, err := adm.DescribeAllLogDirs(ctx, page1); err == nil {
		dirs.Each(func(d kadm.DescribedLogDir) {
			for t, ps := range d.Topics {
				for _, p := range ps {
					sizes[t] += p.Size
				}
			}
		})
	}
	rates := map[string]float64{}
	const window = time.Minute
	ends, err1 := adm.ListEndOffsets(ctx, names...)
	after, err2 := adm.ListOffsetsAfterMilli(ctx, time.Now().Add(-window).UnixMilli(), names...)
	if err1 == nil && err2 == nil {
		ends.Each(func(e kadm.ListedOffset) {
			if a, ok := after.Lookup(e.Topic, e.Partition); ok && e.Err == nil && a.Err == nil && a.Offset >= 0 && a.Offset < e.Offset {
				rates[e.Topic] += float64(e.Offset-a.Offset) / window.Seconds()
			}
		})
	}
	for i := range rows {
		rows[i].Bytes, rows[i].MessagesSec = sizes[rows[i].Name], rates[rows[i].Name]
	}
	out.Items = rows
	return out, nil
}

func pageOf[T any](all []T, page, size int) []T {
	lo := page * size
	if lo >= len(all) {
		return []T{} // [] in JSON, not null
	}
	return all[lo:min(lo+size, len(all))]
}

// PartitionRow is a row of a topic's partitions.
type PartitionRow struct {
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	Offline   []int32 `json:"offlineReplicas,omitempty"`
	Start     int64   `json:"logStartOffset"`
	End       int64   `json:"logEndOffset"`
	Bytes     int64   `json:"bytes"` // of the leader's log; -1 unknown (the leader did not answer)
	Error     string  `json:"error,omitempty"`
}

// ConfigRow is a topic config.
type ConfigRow struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Source    string `json:"source"`
	Sensitive bool   `json:"sensitive"`
	ReadOnly  bool   `json:"readOnly"`
}

// GroupRef is a group with committed offsets on a topic.
type GroupRef struct {
	Group string `json:"group"`
	Lag   int64  `json:"lag"`
}

// TopicDetail is /api/topics/{topic}.
type TopicDetail struct {
	Name       string             `json:"name"`
	Partitions Page[PartitionRow] `json:"partitions"`
	Configs    []ConfigRow        `json:"configs"`
	Groups     []GroupRef         `json:"groups"`
	Errors     []string           `json:"errors,omitempty"`
}

func topicDetail(ctx context.Context, adm *kadm.Client, name string, page, size int) (TopicDetail, error) {
	d := TopicDetail{Name: name, Partitions: Page[PartitionRow]{Items: []PartitionRow{}}, Configs: []ConfigRow{}, Groups: []GroupRef{}}
	fail := func(what string, err error) { d.Errors = append(d.Errors, what+": "+err.Error()) }
	td, err := adm.ListTopicsWithInternal(ctx, name)
	if err != nil {
		return d, err
	}
	t, ok := td[name]
	if !ok || t.Err != nil {
		if ok && t.Err != nil {
			return d, t.Err
		}
		return d, kerr.UnknownTopicOrPartition
	}
	var rows []PartitionRow
	for _, p := range t.Partitions.Sorted() {
		r := PartitionRow{Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR, Offline: p.OfflineReplicas}
		if p.Err != nil {
			r.Error = p.Err.Error()
		}
		rows = append(rows, r)
	}
	d.Partitions = Page[PartitionRow]{Total: len(rows), Page: page, Size: size}
	rows = pageOf(rows, page, size)
	ps := kadm.TopicsSet{}
	for _, r := range rows {
		ps.Add(name, r.Partition)
	}
	starts, err := adm.ListStartOffsets(ctx, name)
	if err != nil {
		fail("ListOffsets", err)
	}
	ends, err := adm.ListEndOffsets(ctx, name)
	if err != nil {
		fail("ListOffsets", err)
	}
	// A broker that does not answer DescribeLogDirs (stopped, or fenced
	// and so unknown to the client) leaves its partitions' sizes unknown
	// (-1, shown as ?), not an error over the page.
	dirs, _ := adm.DescribeAllLogDirs(ctx, ps)
	for i := range rows {
		r := &rows[i]
		r.Start, r.End = -1, -1
		if o, ok := starts.Lookup(name, r.Partition); ok && o.Err == nil {
			r.Start = o.Offset
		}
		if o, ok := ends.Lookup(name, r.Partition); ok && o.Err == nil {
			r.End = o.Offset
		}
		r.Bytes = -1
		if dp, ok := dirs[r.Leader].LookupPartition(name, r.Partition); ok {
			r.Bytes = dp.Size
		}
	}
	d.Partitions.Items = rows
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err == nil && len(rcs) == 1 && rcs[0].Err != nil {
		err = rcs[0].Err
	}
	if err != nil {
		fail("DescribeConfigs", err)
	} else {
		for _, cfg := range rcs[0].Configs {
			cr := ConfigRow{Name: cfg.Key, Source: cfg.Source.String(), Sensitive: cfg.Sensitive}
			if cfg.Value != nil && !cfg.Sensitive {
				cr.Value = *cfg.Value
			}
			d.Configs = append(d.Configs, cr)
		}
		sort.Slice(d.Configs, func(i, j int) bool { return d.Configs[i].Name < d.Configs[j].Name })
	}
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		fail("ListGroups", err)
	} else {
		fetched := adm.FetchManyOffsets(ctx, gs.Groups()...)
		fetched.EachError(func(r kadm.FetchOffsetsResponse) {})
		for g, r := range fetched {
			if r.Err != nil {
				continue
			}
			var lag int64
			found := false
			r.Fetched.Each(func(o kadm.OffsetResponse) {
				if o.Topic != name || o.Err != nil {
					return
				}
				found = true
				if e, ok := ends.Lookup(name, o.Partition); ok && e.Err == nil {
					lag += max(e.Offset-o.At, 0)
				}
			})
			if found {
				d.Groups = append(d.Groups, GroupRef{Group: g, Lag: lag})
			}
		}
		sort.Slice(d.Groups, func(i, j int) bool { return d.Groups[i].Group < d.Groups[j].Group })
	}
	return d, nil
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

func sortBy[T any, K int32 | int64 | string](s []T, key func(T) K) {
	sort.Slice(s, func(i, j int) bool { return key(s[i]) < key(s[j]) })
}
