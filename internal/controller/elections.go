package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
)

// Election types of ElectLeaders (KIP-460).
const (
	ElectPreferred int8 = 0
	ElectUnclean   int8 = 1
)

// Errors of ElectLeaders, per partition.
var (
	// ErrElectionNotNeeded: the wanted leader already leads
	// (ELECTION_NOT_NEEDED).
	ErrElectionNotNeeded = errors.New("election not needed")
	// ErrPreferredLeaderNotAvailable: the preferred replica is not in the
	// ISR or is fenced (PREFERRED_LEADER_NOT_AVAILABLE).
	ErrPreferredLeaderNotAvailable = errors.New("preferred leader not available")
	// ErrEligibleLeadersNotAvailable: an unclean election found no live
	// replica (ELIGIBLE_LEADERS_NOT_AVAILABLE).
	ErrEligibleLeadersNotAvailable = errors.New("no eligible leader available")
)

// PartitionRef names one partition of ElectLeaders.
type PartitionRef struct {
	Topic     string
	Partition int32
}

// ElectLeaders runs preferred or unclean leader elections (ElectLeaders,
// KIP-183/KIP-460) for parts, or for every partition when parts is nil;
// the result holds one error (nil on success) per partition in parts
// (ElectionNotNeeded entries are left out when parts is nil).
func (c *Controller) ElectLeaders(ctx context.Context, electionType int8, parts []PartitionRef) (map[PartitionRef]error, error) {
	out := map[PartitionRef]error{}
	err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		return c.electionRecords(im, electionType, parts, out), nil
	})
	return out, err
}

// electionRecords runs the elections of ElectLeaders over im, setting out.
func (c *Controller) electionRecords(im *metadata.Image, electionType int8, parts []PartitionRef, out map[PartitionRef]error) []metadata.Record {
	all := parts == nil
	if all {
		for _, name := range im.TopicNames() {
			for i := range im.Topic(name).Partitions {
				parts = append(parts, PartitionRef{name, int32(i)})
			}
		}
	}
	var recs []metadata.Record
	for _, ref := range parts {
		t := im.Topic(ref.Topic)
		if t == nil || ref.Partition < 0 || int(ref.Partition) >= len(t.Partitions) {
			out[ref] = ErrUnknownTopic
			continue
		}
		p := t.Partitions[ref.Partition]
		var rec *metadata.PartitionRecord
		var err error
		if electionType == ElectUnclean {
			rec, err = uncleanElection(im, t, ref.Partition, p)
		} else {
			rec, err = preferredElection(im, t, ref.Partition, p)
		}
		if rec != nil {
			recs = append(recs, *rec)
			if electionType == ElectUnclean {
				c.UncleanElections.Add(1)
			}
		}
		if all && (errors.Is(err, ErrElectionNotNeeded) || errors.Is(err, ErrPreferredLeaderNotAvailable)) {
			continue
		}
		out[ref] = err
	}
	return recs
}

func live(im *metadata.Image, id int32) bool {
	b := im.Broker(id)
	return b != nil && !b.Fenced
}

// preferredElection moves leadership to the first replica when it is
// in-sync and live.
func preferredElection(im *metadata.Image, t *metadata.Topic, i int32, p metadata.Partition) (*metadata.PartitionRecord, error) {
	if len(p.Replicas) == 0 {
		return nil, ErrPreferredLeaderNotAvailable
	}
	pref := p.Replicas[0]
	if p.Leader == pref {
		return nil, ErrElectionNotNeeded
	}
	if !slices.Contains(p.ISR, pref) || !live(im, pref) || slices.Contains(p.LostReplicas, pref) {
		return nil, ErrPreferredLeaderNotAvailable
	}
	return &metadata.PartitionRecord{TopicID: t.ID, Partition: i, Replicas: p.Replicas, AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas, LostReplicas: p.LostReplicas, ISR: p.ISR,
		Leader: pref, LeaderEpoch: p.LeaderEpoch + 1, PartitionEpoch: p.PartitionEpoch + 1}, nil
}

// uncleanElection gives a leaderless partition a leader from its live
// replicas even outside the ISR, accepting the loss of what only the old
// ISR had (unclean.leader.election.enable).
func uncleanElection(im *metadata.Image, t *metadata.Topic, i int32, p metadata.Partition) (*metadata.PartitionRecord, error) {
	if p.Leader >= 0 && live(im, p.Leader) {
		return nil, ErrElectionNotNeeded
	}
	for _, r := range p.Replicas {
		if live(im, r) && !slices.Contains(p.LostReplicas, r) {
			return &metadata.PartitionRecord{TopicID: t.ID, Partition: i, Replicas: p.Replicas, AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas, LostReplicas: p.LostReplicas, ISR: []int32{r},
				Leader: r, LeaderEpoch: p.LeaderEpoch + 1, PartitionEpoch: p.PartitionEpoch + 1}, nil
		}
	}
	return nil, ErrEligibleLeadersNotAvailable
}

// uncleanAllowed reports the topic's unclean.leader.election.enable: the
// topic's own, else the cluster-wide dynamic default, else this
// controller's properties, as Kafka's controller resolves it
// (ConfigurationControlManager: per-broker dynamic configs do not count).
func (c *Controller) uncleanAllowed(im *metadata.Image, t *metadata.Topic) bool {
	if v, ok := t.Configs["unclean.leader.election.enable"]; ok {
		return v == "true"
	}
	if v, ok := im.BrokerConfigs("")["unclean.leader.election.enable"]; ok {
		return strings.EqualFold(strings.TrimSpace(v), "true")
	}
	return c.node.Topic["unclean.leader.election.enable"] == "true"
}

// uncleanAfterConfig returns the unclean elections that config
// records recs, about to be committed over im, allow: each leaderless
// partition of a topic whose unclean.leader.election.enable they turn on
// gets a live replica as leader at once (Kafka's controller finds such
// partitions every 5 minutes). topic limits the search to one topic
// ("" for all: a change of the cluster-wide default).
func (c *Controller) uncleanAfterConfig(im *metadata.Image, recs []metadata.Record, topic string) []metadata.Record {
	next := im.Apply(im.Offset+1, recs)
	var out []metadata.Record
	for _, name := range next.TopicNames() {
		if topic != "" && name != topic {
			continue
		}
		t, before := next.Topic(name), im.Topic(name)
		if before == nil || c.uncleanAllowed(im, before) || !c.uncleanAllowed(next, t) {
			continue
		}
		for i, p := range t.Partitions {
			if p.Leader >= 0 {
				continue
			}
			if rec, err := uncleanElection(next, t, int32(i), p); err == nil && rec != nil {
				c.logger.Warn("unclean leader election", "topic", name, "partition", i, "leader", rec.Leader)
				out = append(out, *rec)
			}
		}
	}
	return out
}

// rebalanceLeaders is the automatic preferred leader election
// (auto.leader.rebalance.enable): on brokers whose share of partitions led
// by someone else than their preferred replica exceeds
// leader.imbalance.per.broker.percentage, it moves leadership back.
func (c *Controller) rebalanceLeaders(ctx context.Context) {
	im := c.image.Load()
	type count struct{ preferred, notLed int }
	perBroker := map[int32]*count{}
	var candidates []PartitionRef
	for _, name := range im.TopicNames() {
		t := im.Topic(name)
		for i, p := range t.Partitions {
			if len(p.Replicas) == 0 {
				continue
			}
			pref := p.Replicas[0]
			cnt := perBroker[pref]
			if cnt == nil {
				cnt = &count{}
				perBroker[pref] = cnt
			}
			cnt.preferred++
			if p.Leader != pref {
				cnt.notLed++
				if slices.Contains(p.ISR, pref) && live(im, pref) {
					candidates = append(candidates, PartitionRef{name, int32(i)})
				}
			}
		}
	}
	var elect []PartitionRef
	for _, ref := range candidates {
		p := im.Topic(ref.Topic).Partitions[ref.Partition]
		cnt := perBroker[p.Replicas[0]]
		if cnt.notLed*100 > int(c.node.LeaderImbalancePerBrokerPercentage)*cnt.preferred {
			elect = append(elect, ref)
		}
	}
	if len(elect) == 0 {
		return
	}
	res, err := c.ElectLeaders(ctx, ElectPreferred, elect)
	if err != nil {
		c.logger.Warn("automatic preferred leader election failed", "err", err)
		return
	}
	moved := 0
	for _, e := range res {
		if e == nil {
			moved++
		}
	}
	c.logger.Info("moved leadership back to preferred replicas", "partitions", moved)
}

// leaderBalancer runs rebalanceLeaders every
// leader.imbalance.check.interval.seconds while this controller is active.
func (t *brokerTracker) leaderBalancer(stopc chan struct{}) {
	defer t.wg.Done()
	interval := t.c.node.LeaderImbalanceCheckInterval
	if interval <= 0 {
		interval = 300 * time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stopc:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			t.c.rebalanceLeaders(ctx)
			cancel()
		}
	}
}
