package metadata

import (
	"maps"
	"slices"
	"sort"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/quota"
)

// Image is the cluster metadata after applying the log up to Offset.
type Image struct {
	// Offset is the metadata log offset of the last record applied, -1 for
	// an empty log.
	Offset    int64
	ClusterID string
	topics    map[string]*Topic
	byID      map[UUID]*Topic
	brokers   map[int32]*Broker
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
}

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
}

// Broker is a registered broker.
type Broker struct {
	ID        int32
	Epoch     int64
	Endpoints []Endpoint
	Rack      *string
	Fenced    bool
}

// Empty returns the image of an empty metadata log.
func Empty(clusterID string) *Image {
	return &Image{
		Offset:        -1,
		ClusterID:     clusterID,
		topics:        map[string]*Topic{},
		byID:          map[UUID]*Topic{},
		brokers:       map[int32]*Broker{},
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
func (im *Image) Topic(name string) *Topic { return im.topics[name] }

// TopicByID returns the topic with id or nil.
func (im *Image) TopicByID(id UUID) *Topic { return im.byID[id] }

// TopicNames returns every topic name, sorted.
func (im *Image) TopicNames() []string {
	names := slices.Collect(maps.Keys(im.topics))
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
// offset. The receiver is unchanged.
func (im *Image) Apply(offset int64, recs []Record) *Image {
	next := &Image{
		Offset:         offset + int64(len(recs)) - 1,
		ClusterID:      im.ClusterID,
		topics:         maps.Clone(im.topics),
		byID:           maps.Clone(im.byID),
		brokers:        maps.Clone(im.brokers),
		brokerConfigs:  maps.Clone(im.brokerConfigs),
		groupConfigs:   im.groupConfigs,
		NextProducerID: im.NextProducerID,
		scram:          im.scram,
		Bootstrapped:   im.Bootstrapped,
		acls:           im.acls,
		aclIndex:       im.aclIndex,
		quotas:         im.quotas,
	}
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
	if len(recs) == 0 {
		next.Offset = im.Offset
	}
	owned := map[UUID]bool{} // topics already copied for this Apply
	mutable := func(id UUID) *Topic {
		t := next.byID[id]
		if t == nil {
			return nil
		}
		if !owned[id] {
			c := *t
			c.Partitions = slices.Clone(t.Partitions)
			c.Configs = maps.Clone(t.Configs)
			t = &c
			next.byID[id] = t
			next.topics[t.Name] = t
			owned[id] = true
		}
		return t
	}
	for _, r := range recs {
		switch r := r.(type) {
		case TopicRecord:
			t := &Topic{Name: r.Name, ID: r.ID, Configs: map[string]string{}}
			next.topics[r.Name] = t
			next.byID[r.ID] = t
			owned[r.ID] = true
		case PartitionRecord:
			t := mutable(r.TopicID)
			if t == nil || r.Partition < 0 {
				continue
			}
			for int(r.Partition) >= len(t.Partitions) {
				t.Partitions = append(t.Partitions, Partition{Leader: -1})
			}
			t.Partitions[r.Partition] = Partition{
				Replicas:       slices.Clone(r.Replicas),
				ISR:            slices.Clone(r.ISR),
				Leader:         r.Leader,
				LeaderEpoch:    r.LeaderEpoch,
				PartitionEpoch: r.PartitionEpoch,

				AddingReplicas:   slices.Clone(r.AddingReplicas),
				RemovingReplicas: slices.Clone(r.RemovingReplicas),
			}
		case RemoveTopicRecord:
			if t := next.byID[r.ID]; t != nil {
				delete(next.byID, r.ID)
				delete(next.topics, t.Name)
			}
		case ConfigRecord:
			switch r.ResourceType {
			case ResourceTopic:
				t := next.topics[r.ResourceName]
				if t == nil {
					continue
				}
				t = mutable(t.ID)
				if r.Value == nil {
					delete(t.Configs, r.Name)
				} else {
					t.Configs[r.Name] = *r.Value
				}
			case ResourceBroker:
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
			next.brokers[r.BrokerID] = &Broker{ID: r.BrokerID, Epoch: r.Epoch, Endpoints: slices.Clone(r.Endpoints), Rack: r.Rack, Fenced: r.Fenced}
		case BootstrapRecord:
			next.Bootstrapped = true
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
	return next
}
