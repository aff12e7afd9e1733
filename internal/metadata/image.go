package metadata

import (
	"iter"
	"maps"
	"slices"
	"sort"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/pmap"
	"github.com/samsahq/samsa/internal/quota"
)

// Image is the cluster metadata after applying the log up to Offset.
// Images share what they do not change: topics live in persistent maps
// (pmap), so Apply costs what its records change (a PartitionRecord: the
// path to its topic in two tries and a copy of that topic's partition
// slice), not a copy of every topic.
type Image struct {
	// Offset is the metadata log offset of the last record applied, -1 for
	// an empty log.
	Offset    int64
	ClusterID string
	topics    pmap.Map[string, *Topic]
	byID      pmap.Map[UUID, *Topic]
	brokers   map[int32]*Broker
	// replicas counts the partition replicas each broker is assigned.
	replicas map[int32]int
	// delta is what the Apply that made this image changed.
	delta *Delta
	// brokerConfigs are dynamic broker configs; "" is the cluster default.
	brokerConfigs map[string]map[string]string
	// groupConfigs are the dynamic configs of groups, by group id.
	groupConfigs map[string]map[string]string
	// NextProducerID is the first producer id not yet reserved.
	NextProducerID int64
	// Bootstrapped: the bootstrap records were written (BootstrapRecord).
	Bootstrapped bool
	// scram holds the SCRAM credentials by mechanism and user.
	scram map[ScramKey]UserScramCredentialRecord
	// acls are the ACL bindings by record id; aclIndex indexes them,
	// rebuilt by an Apply that changes them.
	acls     map[UUID]acl.Binding
	aclIndex *acl.Index
	// quotas are the client quotas by entity (ClientQuotaRecord).
	quotas quota.Configs
	// features are the finalized feature levels above 0, by name
	// (FeatureLevelRecord).
	features map[string]int16
}

// FeatureLevel returns the finalized level of feature name, 0 when none
// was finalized (Kafka's FeaturesImage).
func (im *Image) FeatureLevel(name string) int16 { return im.features[name] }

// Features returns a copy of the finalized feature levels above 0, by name.
func (im *Image) Features() map[string]int16 { return maps.Clone(im.features) }

// ScramKey names one SCRAM credential: a user and a mechanism (1
// SCRAM-SHA-256, 2 SCRAM-SHA-512).
type ScramKey struct {
	Name      string
	Mechanism int8
}

// ScramCredential returns the SCRAM credential of user for mechanism.
func (im *Image) ScramCredential(mechanism int8, user string) (UserScramCredentialRecord, bool) {
	c, ok := im.scram[ScramKey{user, mechanism}]
	return c, ok
}

// ScramCredentials returns every SCRAM credential, ordered by user then
// mechanism. The records must not be modified.
func (im *Image) ScramCredentials() []UserScramCredentialRecord {
	out := slices.Collect(maps.Values(im.scram))
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Mechanism < out[j].Mechanism
	})
	return out
}

// Topic is one topic's metadata. Shared between images: never modify.
type Topic struct {
	Name       string
	ID         UUID
	Partitions []Partition // index is the partition id
	// Configs holds the topic-level overrides (DYNAMIC_TOPIC_CONFIG).
	Configs map[string]string
}

// Partition is a partition's replica placement and leadership.
type Partition struct {
	Replicas       []int32
	ISR            []int32
	Leader         int32 // -1 when leaderless
	LeaderEpoch    int32
	PartitionEpoch int32
	// AddingReplicas and RemovingReplicas are set while a reassignment is
	// in progress (KIP-455).
	AddingReplicas   []int32
	RemovingReplicas []int32
	// LostReplicas are the replicas their broker cannot host
	// (PartitionRecord.LostReplicas); nil for almost every partition.
	LostReplicas []int32
}

// Broker is a registered broker.
type Broker struct {
	ID        int32
	Epoch     int64
	Endpoints []Endpoint
	Rack      *string
	Fenced    bool
}

// Delta is what one Apply changed, for listeners that follow images
// without walking every topic (Kafka's MetadataDelta). It is shared: never
// modify.
type Delta struct {
	// From is the Offset of the image Apply was called on.
	From int64
	// Partitions holds, by topic id, the partitions PartitionRecords set
	// (a topic created in the Apply lists all of its partitions).
	Partitions map[UUID][]int32
	// Configs holds the ids of the topics whose configs changed.
	Configs map[UUID]bool
	// Removed are the topics RemoveTopicRecords removed, as they were.
	Removed []*Topic
	// Brokers: a registration changed. BrokerConfigs: a dynamic broker
	// config changed.
	Brokers, BrokerConfigs bool
}

// Delta returns what the Apply that made im changed; nil for an image
// Empty returned.
func (im *Image) Delta() *Delta { return im.delta }

// ReplicaCount is the number of partition replicas assigned to broker id.
func (im *Image) ReplicaCount(id int32) int { return im.replicas[id] }

// Empty returns the image of an empty metadata log.
func Empty(clusterID string) *Image {
	return &Image{
		Offset:        -1,
		ClusterID:     clusterID,
		brokers:       map[int32]*Broker{},
		replicas:      map[int32]int{},
		brokerConfigs: map[string]map[string]string{},
		groupConfigs:  map[string]map[string]string{},
		scram:         map[ScramKey]UserScramCredentialRecord{},
		acls:          map[UUID]acl.Binding{},
		aclIndex:      acl.NewIndex(nil),
		quotas:        quota.Configs{},
	}
}

// Quotas are the client quotas by entity key. Must not be modified.
func (im *Image) Quotas() quota.Configs { return im.quotas }

// ACLIndex is the index of the ACL bindings, for acl.Authorizer. Never nil.
func (im *Image) ACLIndex() *acl.Index { return im.aclIndex }

// ACLs calls fn with each ACL binding and its record id, in no order,
// until fn returns false.
func (im *Image) ACLs(fn func(id UUID, b acl.Binding) bool) {
	for id, b := range im.acls {
		if !fn(id, b) {
			return
		}
	}
}

// Topic returns the named topic or nil.
func (im *Image) Topic(name string) *Topic {
	t, _ := im.topics.Get(name)
	return t
}

// TopicByID returns the topic with id or nil.
func (im *Image) TopicByID(id UUID) *Topic {
	t, _ := im.byID.Get(id)
	return t
}

// TopicCount is the number of topics.
func (im *Image) TopicCount() int { return im.topics.Len() }

// Topics yields every topic, in no particular order.
func (im *Image) Topics() iter.Seq[*Topic] {
	return func(yield func(*Topic) bool) {
		for _, t := range im.topics.All() {
			if !yield(t) {
				return
			}
		}
	}
}

// TopicNames returns every topic name, sorted: O(n log n) in the topics.
func (im *Image) TopicNames() []string {
	names := make([]string, 0, im.topics.Len())
	for n := range im.topics.All() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Broker returns the broker with id or nil.
func (im *Image) Broker(id int32) *Broker { return im.brokers[id] }

// Brokers returns the registered brokers ordered by id.
func (im *Image) Brokers() []*Broker {
	out := slices.Collect(maps.Values(im.brokers))
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// BrokerConfigs returns the dynamic configs of broker name ("" = cluster
// default). The map must not be modified.
func (im *Image) BrokerConfigs(name string) map[string]string { return im.brokerConfigs[name] }

// GroupConfigs returns the dynamic configs of group id (ConfigRecords of
// resource type 32), nil without any. The map must not be modified.
func (im *Image) GroupConfigs(id string) map[string]string { return im.groupConfigs[id] }

// Apply returns a new image with recs applied at offsets starting at
// offset. The receiver is unchanged. It costs what recs change: each
// topic they touch is copied once (its partition slice and configs), the
// tries of topics by name and id along one path per topic; the maps of
// brokers, replica counts and broker configs (a few entries each) when
// a record changes them.
func (im *Image) Apply(offset int64, recs []Record) *Image {
	next := &Image{
		Offset:         offset + int64(len(recs)) - 1,
		ClusterID:      im.ClusterID,
		topics:         im.topics,
		byID:           im.byID,
		brokers:        im.brokers,
		replicas:       im.replicas,
		brokerConfigs:  im.brokerConfigs,
		groupConfigs:   im.groupConfigs,
		NextProducerID: im.NextProducerID,
		scram:          im.scram,
		Bootstrapped:   im.Bootstrapped,
		acls:           im.acls,
		aclIndex:       im.aclIndex,
		quotas:         im.quotas,
		features:       im.features,
		delta:          &Delta{From: im.Offset},
	}
	d := next.delta
	scramOwned := false
	mutableScram := func() map[ScramKey]UserScramCredentialRecord {
		if !scramOwned {
			next.scram, scramOwned = maps.Clone(next.scram), true
			if next.scram == nil {
				next.scram = map[ScramKey]UserScramCredentialRecord{}
			}
		}
		return next.scram
	}
	quotasCloned := false
	groupsCloned := false // next.groupConfigs is a copy of im's
	aclsChanged := false
	mutableACLs := func() map[UUID]acl.Binding {
		if !aclsChanged {
			aclsChanged = true
			next.acls = maps.Clone(im.acls)
		}
		return next.acls
	}
	brokersOwned, replicasOwned, brokerConfigsOwned := false, false, false
	countReplicas := func(rs []int32, by int) {
		if len(rs) == 0 {
			return
		}
		if !replicasOwned {
			next.replicas, replicasOwned = maps.Clone(next.replicas), true
			if next.replicas == nil {
				next.replicas = map[int32]int{}
			}
		}
		for _, r := range rs {
			if next.replicas[r] += by; next.replicas[r] == 0 {
				delete(next.replicas, r)
			}
		}
	}
	if len(recs) == 0 {
		next.Offset = im.Offset
	}
	// Topics copied for this Apply (written once to the tries when done),
	// in order of first change.
	owned := map[UUID]*Topic{}
	ownedName := map[string]UUID{}
	var order []UUID
	lookup := func(id UUID) *Topic {
		if t := owned[id]; t != nil {
			return t
		}
		t, _ := next.byID.Get(id)
		return t
	}
	mutable := func(id UUID) *Topic {
		if t := owned[id]; t != nil {
			return t
		}
		t, _ := next.byID.Get(id)
		if t == nil {
			return nil
		}
		c := *t
		c.Partitions = slices.Clone(t.Partitions)
		c.Configs = maps.Clone(t.Configs)
		owned[id] = &c
		ownedName[c.Name] = id
		order = append(order, id)
		return &c
	}
	for _, r := range recs {
		switch r := r.(type) {
		case TopicRecord:
			t := &Topic{Name: r.Name, ID: r.ID, Configs: map[string]string{}}
			if _, ok := owned[r.ID]; !ok {
				order = append(order, r.ID)
			}
			owned[r.ID] = t
			ownedName[r.Name] = r.ID
			if d.Partitions == nil {
				d.Partitions = map[UUID][]int32{}
			}
			if _, ok := d.Partitions[r.ID]; !ok {
				d.Partitions[r.ID] = []int32{}
			}
		case PartitionRecord:
			t := mutable(r.TopicID)
			if t == nil || r.Partition < 0 {
				continue
			}
			for int(r.Partition) >= len(t.Partitions) {
				t.Partitions = append(t.Partitions, Partition{Leader: -1})
			}
			countReplicas(t.Partitions[r.Partition].Replicas, -1)
			countReplicas(r.Replicas, 1)
			t.Partitions[r.Partition] = Partition{
				Replicas:       slices.Clone(r.Replicas),
				ISR:            slices.Clone(r.ISR),
				Leader:         r.Leader,
				LeaderEpoch:    r.LeaderEpoch,
				PartitionEpoch: r.PartitionEpoch,

				AddingReplicas:   slices.Clone(r.AddingReplicas),
				RemovingReplicas: slices.Clone(r.RemovingReplicas),
				LostReplicas:     slices.Clone(r.LostReplicas),
			}
			if d.Partitions == nil {
				d.Partitions = map[UUID][]int32{}
			}
			d.Partitions[r.TopicID] = append(d.Partitions[r.TopicID], r.Partition)
		case RemoveTopicRecord:
			t := lookup(r.ID)
			if t == nil {
				continue
			}
			for _, p := range t.Partitions {
				countReplicas(p.Replicas, -1)
			}
			if _, ok := owned[r.ID]; ok {
				delete(owned, r.ID)
				if ownedName[t.Name] == r.ID {
					delete(ownedName, t.Name)
				}
				order = slices.DeleteFunc(order, func(id UUID) bool { return id == r.ID })
			}
			delete(d.Partitions, r.ID)
			delete(d.Configs, r.ID)
			if old, _ := im.byID.Get(r.ID); old != nil {
				d.Removed = append(d.Removed, old)
			}
			next.byID = next.byID.Delete(r.ID)
			if cur, _ := next.topics.Get(t.Name); cur != nil && cur.ID == r.ID {
				next.topics = next.topics.Delete(t.Name)
			}
		case ConfigRecord:
			switch r.ResourceType {
			case ResourceTopic:
				id, found := ownedName[r.ResourceName]
				if !found {
					t, _ := next.topics.Get(r.ResourceName)
					if t == nil {
						continue
					}
					id = t.ID
				}
				t := mutable(id)
				if r.Value == nil {
					delete(t.Configs, r.Name)
				} else {
					t.Configs[r.Name] = *r.Value
				}
				if d.Configs == nil {
					d.Configs = map[UUID]bool{}
				}
				d.Configs[id] = true
			case ResourceBroker:
				if !brokerConfigsOwned {
					next.brokerConfigs, brokerConfigsOwned = maps.Clone(next.brokerConfigs), true
					if next.brokerConfigs == nil {
						next.brokerConfigs = map[string]map[string]string{}
					}
				}
				m := maps.Clone(next.brokerConfigs[r.ResourceName])
				if m == nil {
					m = map[string]string{}
				}
				if r.Value == nil {
					delete(m, r.Name)
				} else {
					m[r.Name] = *r.Value
				}
				next.brokerConfigs[r.ResourceName] = m
				d.BrokerConfigs = true
			case ResourceGroup:
				if !groupsCloned {
					groupsCloned = true
					next.groupConfigs = maps.Clone(im.groupConfigs)
					if next.groupConfigs == nil {
						next.groupConfigs = map[string]map[string]string{}
					}
				}
				m := maps.Clone(next.groupConfigs[r.ResourceName])
				if m == nil {
					m = map[string]string{}
				}
				if r.Value == nil {
					delete(m, r.Name)
				} else {
					m[r.Name] = *r.Value
				}
				if len(m) == 0 {
					delete(next.groupConfigs, r.ResourceName)
				} else {
					next.groupConfigs[r.ResourceName] = m
				}
			}
		case RegisterBrokerRecord:
			if !brokersOwned {
				next.brokers, brokersOwned = maps.Clone(next.brokers), true
				if next.brokers == nil {
					next.brokers = map[int32]*Broker{}
				}
			}
			next.brokers[r.BrokerID] = &Broker{ID: r.BrokerID, Epoch: r.Epoch, Endpoints: slices.Clone(r.Endpoints), Rack: r.Rack, Fenced: r.Fenced}
			d.Brokers = true
		case BootstrapRecord:
			next.Bootstrapped = true
		case FeatureLevelRecord:
			next.features = maps.Clone(next.features)
			if next.features == nil {
				next.features = map[string]int16{}
			}
			if r.FeatureLevel <= 0 {
				delete(next.features, r.Name)
			} else {
				next.features[r.Name] = r.FeatureLevel
			}
		case UserScramCredentialRecord:
			mutableScram()[ScramKey{r.Name, r.Mechanism}] = r
		case RemoveUserScramCredentialRecord:
			delete(mutableScram(), ScramKey(r))
		case ProducerIDsRecord:
			if r.NextProducerID > next.NextProducerID {
				next.NextProducerID = r.NextProducerID
			}
		case AccessControlEntryRecord:
			mutableACLs()[r.ID] = r.Binding
		case RemoveAccessControlEntryRecord:
			if _, ok := next.acls[r.ID]; ok {
				delete(mutableACLs(), r.ID)
			}
		case ClientQuotaRecord:
			if !quotasCloned {
				quotasCloned = true
				next.quotas = maps.Clone(im.quotas)
			}
			e := r.Entity.Normalize()
			k := e.Key()
			var m map[string]float64
			if q := next.quotas[k]; q != nil {
				m = maps.Clone(q.Values)
			} else {
				m = map[string]float64{}
			}
			if r.Remove {
				delete(m, r.Key)
			} else {
				m[r.Key] = r.Value
			}
			if len(m) == 0 {
				delete(next.quotas, k)
			} else {
				next.quotas[k] = &quota.EntityQuotas{Entity: e, Values: m}
			}
		}
	}
	if aclsChanged {
		next.aclIndex = acl.NewIndex(slices.Collect(maps.Values(next.acls)))
	}
	for _, id := range order {
		t := owned[id]
		next.byID = next.byID.Set(id, t)
		next.topics = next.topics.Set(t.Name, t)
	}
	return next
}
