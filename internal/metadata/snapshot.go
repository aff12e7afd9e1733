package metadata

import (
	"maps"
	"slices"
	"sort"
	"strings"
)

// Records returns records that rebuild im when applied to Empty(im.ClusterID)
// in one Apply (see FromSnapshot): the content of a metadata snapshot, as
// Kafka's controllers write their image as records (KIP-630). Removed
// topics, config removals and superseded registrations leave no record;
// every record stands for at least one record of the log that built im
// (a partition that only pads a topic up to a higher partition is left
// out unless it is the topic's last), so len(Records()) ≤ im.Offset+1.
//
// im must come from a log as the controller writes it: a TopicRecord never
// names a live topic nor reuses a topic id (two live topics of one name
// are not representable as records).
//
// The order is deterministic for an image: topics by name, each followed
// by its partitions and configs; then brokers, broker and group configs,
// producer ids, features, SCRAM credentials, ACLs and quotas, each
// sorted. It costs O(the image) and does not modify im.
func (im *Image) Records() []Record {
	var out []Record
	topics := make([]*Topic, 0, im.byID.Len())
	for _, t := range im.byID.All() {
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(a, b *Topic) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range topics {
		out = append(out, TopicRecord{Name: t.Name, ID: t.ID})
		for i, p := range t.Partitions {
			if i < len(t.Partitions)-1 && p.padding() {
				continue
			}
			out = append(out, PartitionRecord{
				TopicID:          t.ID,
				Partition:        int32(i),
				Replicas:         p.Replicas,
				ISR:              p.ISR,
				Leader:           p.Leader,
				LeaderEpoch:      p.LeaderEpoch,
				PartitionEpoch:   p.PartitionEpoch,
				AddingReplicas:   p.AddingReplicas,
				RemovingReplicas: p.RemovingReplicas,
				LostReplicas:     p.LostReplicas,
			})
		}
		out = appendConfigs(out, ResourceTopic, t.Name, t.Configs)
	}
	for _, id := range slices.Sorted(maps.Keys(im.brokers)) {
		b := im.brokers[id]
		out = append(out, RegisterBrokerRecord{BrokerID: b.ID, Epoch: b.Epoch, Endpoints: b.Endpoints, Rack: b.Rack, Fenced: b.Fenced})
	}
	for _, name := range slices.Sorted(maps.Keys(im.brokerConfigs)) {
		out = appendConfigs(out, ResourceBroker, name, im.brokerConfigs[name])
	}
	for _, id := range slices.Sorted(maps.Keys(im.groupConfigs)) {
		out = appendConfigs(out, ResourceGroup, id, im.groupConfigs[id])
	}
	if im.NextProducerID != 0 {
		out = append(out, ProducerIDsRecord{BrokerID: -1, NextProducerID: im.NextProducerID})
	}
	if im.Bootstrapped {
		out = append(out, BootstrapRecord{})
	}
	for _, name := range slices.Sorted(maps.Keys(im.features)) {
		out = append(out, FeatureLevelRecord{Name: name, FeatureLevel: im.features[name]})
	}
	for _, c := range im.ScramCredentials() {
		out = append(out, c)
	}
	ids := slices.SortedFunc(maps.Keys(im.acls), func(a, b UUID) int { return slices.Compare(a[:], b[:]) })
	for _, id := range ids {
		out = append(out, AccessControlEntryRecord{ID: id, Binding: im.acls[id]})
	}
	for _, k := range slices.Sorted(maps.Keys(im.quotas)) {
		q := im.quotas[k]
		for _, key := range slices.Sorted(maps.Keys(q.Values)) {
			out = append(out, ClientQuotaRecord{Entity: q.Entity, Key: key, Value: q.Values[key]})
		}
	}
	return out
}

// appendConfigs appends a ConfigRecord per entry of m, sorted by name.
func appendConfigs(out []Record, typ int8, resource string, m map[string]string) []Record {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := m[n]
		out = append(out, ConfigRecord{ResourceType: typ, ResourceName: resource, Name: n, Value: &v})
	}
	return out
}

// padding reports whether p is what Apply fills in below a partition
// created out of order: no replicas, no leader, epochs 0.
func (p Partition) padding() bool {
	return p.Replicas == nil && p.ISR == nil && p.Leader == -1 && p.LeaderEpoch == 0 && p.PartitionEpoch == 0 &&
		p.AddingReplicas == nil && p.RemovingReplicas == nil && p.LostReplicas == nil
}

// FromSnapshot returns the image of a metadata log whose offsets below
// endOffset are summarised by recs (what Records returned, as a snapshot
// holds it): Empty(clusterID) with recs applied, Offset endOffset-1, and
// a nil Delta (there is no previous image to compare with). It is what
// Empty(clusterID).Apply(endOffset-len(recs), recs) gives, which is how
// quorum's Replay hands a snapshot to the controller, but for the Delta.
func FromSnapshot(clusterID string, endOffset int64, recs []Record) *Image {
	im := Empty(clusterID).Apply(0, recs)
	im.Offset = endOffset - 1
	im.delta = nil
	return im
}
