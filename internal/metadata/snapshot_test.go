package metadata

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/quota"
)

// imageView is every field of an image that readers see, in plain maps,
// for comparing images: empty maps are left out (BrokerConfigs of a broker
// whose configs were all removed is an empty map, absent after a snapshot:
// the same for every reader).
type imageView struct {
	Offset         int64
	ClusterID      string
	Topics         map[string]Topic
	ByID           map[UUID]Topic
	Brokers        map[int32]Broker
	Replicas       map[int32]int
	BrokerConfigs  map[string]map[string]string
	GroupConfigs   map[string]map[string]string
	NextProducerID int64
	Bootstrapped   bool
	Scram          map[ScramKey]UserScramCredentialRecord
	ACLs           map[UUID]acl.Binding
	Quotas         map[string]quota.EntityQuotas
	Features       map[string]int16
}

func viewOf(im *Image) imageView {
	v := imageView{
		Offset: im.Offset, ClusterID: im.ClusterID, NextProducerID: im.NextProducerID, Bootstrapped: im.Bootstrapped,
		Topics: map[string]Topic{}, ByID: map[UUID]Topic{}, Brokers: map[int32]Broker{},
		Replicas: maps.Clone(im.replicas), BrokerConfigs: map[string]map[string]string{}, GroupConfigs: map[string]map[string]string{},
		Scram: maps.Clone(im.scram), ACLs: maps.Clone(im.acls), Quotas: map[string]quota.EntityQuotas{}, Features: maps.Clone(im.features),
	}
	for n, t := range im.topics.All() {
		v.Topics[n] = *t
	}
	for id, t := range im.byID.All() {
		v.ByID[id] = *t
	}
	for id, b := range im.brokers {
		v.Brokers[id] = *b
	}
	for n, m := range im.brokerConfigs {
		if len(m) > 0 {
			v.BrokerConfigs[n] = m
		}
	}
	for n, m := range im.groupConfigs {
		if len(m) > 0 {
			v.GroupConfigs[n] = m
		}
	}
	for k, q := range im.quotas {
		v.Quotas[k] = *q
	}
	for _, m := range []any{&v.Replicas, &v.Scram, &v.ACLs, &v.Features} {
		rv := reflect.ValueOf(m).Elem()
		if rv.Len() == 0 {
			rv.Set(reflect.Zero(rv.Type()))
		}
	}
	return v
}

// recordGen draws records from a small universe of names and ids so that
// records collide: topics removed and recreated under the same name,
// partitions set out of order, configs set and removed, brokers
// re-registered. As the controller, it never creates a topic whose name is
// live nor reuses a topic id.
type recordGen struct {
	r      *rand.Rand
	live   map[string]UUID // topic names in use
	nextID byte
}

func (g *recordGen) record() Record {
	r := g.r
	str := func(prefix string, n int) string { return fmt.Sprintf("%s%d", prefix, r.IntN(n)) }
	// id is a topic id ever created, or one never created.
	id := func() UUID { return UUID{byte(r.IntN(int(g.nextID) + 1))} }
	ints := func() []int32 {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return []int32{}
		}
		out := make([]int32, r.IntN(3)+1)
		for i := range out {
			out[i] = int32(r.IntN(4))
		}
		return out
	}
	value := func() *string {
		if r.IntN(3) == 0 {
			return nil
		}
		s := str("v", 3)
		return &s
	}
	switch r.IntN(16) {
	case 0, 1:
		name := str("t", 3)
		if _, ok := g.live[name]; !ok {
			g.nextID++
			g.live[name] = UUID{g.nextID}
			return TopicRecord{Name: name, ID: UUID{g.nextID}}
		}
		id := g.live[name]
		delete(g.live, name)
		return RemoveTopicRecord{ID: id}
	case 2, 3, 4:
		return PartitionRecord{TopicID: id(), Partition: int32(r.IntN(6)) - 1, Replicas: ints(), ISR: ints(), Leader: int32(r.IntN(4)) - 1,
			LeaderEpoch: int32(r.IntN(3)), PartitionEpoch: int32(r.IntN(3)), AddingReplicas: ints(), RemovingReplicas: ints()}
	case 5:
		id := id()
		for n, l := range g.live {
			if l == id {
				delete(g.live, n)
			}
		}
		return RemoveTopicRecord{ID: id}
	case 6, 7:
		typ := []int8{ResourceTopic, ResourceBroker, ResourceGroup, 99}[r.IntN(4)]
		return ConfigRecord{ResourceType: typ, ResourceName: str("t", 3), Name: str("c", 3), Value: value()}
	case 8:
		rack := value()
		return RegisterBrokerRecord{BrokerID: int32(r.IntN(3)), Epoch: r.Int64N(5), Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: int32(r.IntN(3))}}, Rack: rack, Fenced: r.IntN(2) == 0}
	case 9:
		return ProducerIDsRecord{BrokerID: 1, NextProducerID: r.Int64N(5000)}
	case 10:
		return BootstrapRecord{}
	case 11:
		return FeatureLevelRecord{Name: str("f", 2), FeatureLevel: int16(r.IntN(3))}
	case 12:
		return UserScramCredentialRecord{Name: str("u", 2), Mechanism: int8(r.IntN(2) + 1), Salt: []byte{byte(r.IntN(9))}, StoredKey: []byte{1}, ServerKey: []byte{2}, Iterations: 4096}
	case 13:
		return RemoveUserScramCredentialRecord{Name: str("u", 2), Mechanism: int8(r.IntN(2) + 1)}
	case 14:
		if r.IntN(2) == 0 {
			return RemoveAccessControlEntryRecord{ID: id()}
		}
		return AccessControlEntryRecord{ID: id(), Binding: acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: str("t", 3), PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:" + str("u", 2), Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}}
	default:
		var e quota.Entity
		if r.IntN(2) == 0 {
			n := str("u", 2)
			e = append(e, quota.Component{Type: "user", Name: &n})
		}
		e = append(e, quota.Component{Type: "client-id"})
		return ClientQuotaRecord{Entity: e, Key: str("q", 2), Value: float64(r.IntN(3) + 1), Remove: r.IntN(3) == 0}
	}
}

// roundTrip passes recs through the log encoding, as the log and a
// snapshot file store them.
func roundTrip(t *testing.T, recs []Record) []Record {
	t.Helper()
	out := make([]Record, len(recs))
	for i, r := range recs {
		k, v, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = Decode(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The image built from a snapshot taken at any batch boundary, plus the
// batches after it, equals the image of the whole log replayed, for
// random record sequences; a snapshot holds no more records than the log
// it summarises.
func TestSnapshotEqualsReplay(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 13))
		g := &recordGen{r: r, live: map[string]UUID{}}
		var batches [][]Record
		for range r.IntN(60) + 1 {
			b := make([]Record, r.IntN(5)+1)
			for i := range b {
				b[i] = g.record()
			}
			batches = append(batches, roundTrip(t, b))
		}
		// Some offsets hold no metadata records (LEADER_CHANGE batches).
		images := []*Image{Empty("c")}
		offsets := []int64{0} // offsets[k]: end of batch k-1
		var bases []int64
		off := int64(0)
		for _, b := range batches {
			off += int64(r.IntN(2))
			bases = append(bases, off)
			images = append(images, images[len(images)-1].Apply(off, b))
			off += int64(len(b))
			offsets = append(offsets, off)
		}
		full := viewOf(images[len(images)-1])
		cuts := []int{0, len(images) - 1}
		for range 4 {
			cuts = append(cuts, r.IntN(len(images)))
		}
		for _, k := range cuts {
			snap := images[k].Records()
			if int64(len(snap)) > images[k].Offset+1 {
				t.Fatalf("seed %d cut %d: %d snapshot records for %d offsets", seed, k, len(snap), images[k].Offset+1)
			}
			rt := roundTrip(t, snap)
			// As quorum's Replay hands it over: one batch ending at the
			// snapshot's end offset (an empty image is never written as a
			// snapshot: Apply of no records keeps Offset).
			im := Empty("c").Apply(offsets[k]-int64(len(rt)), rt)
			if len(rt) == 0 {
				im = FromSnapshot("c", offsets[k], rt)
			}
			if !reflect.DeepEqual(viewOf(im), viewOf(FromSnapshot("c", offsets[k], rt))) {
				t.Fatalf("seed %d cut %d: Apply and FromSnapshot differ", seed, k)
			}
			if k > 0 && !reflect.DeepEqual(viewOf(im), viewOf(images[k])) {
				t.Fatalf("seed %d cut %d: snapshot image\n%+v\nwant\n%+v", seed, k, viewOf(im), viewOf(images[k]))
			}
			for i, b := range batches[k:] {
				im = im.Apply(bases[k+i], b)
			}
			if got := viewOf(im); !reflect.DeepEqual(got, full) {
				t.Fatalf("seed %d cut %d of %d: snapshot + tail\n%+v\nfull replay\n%+v", seed, k, len(batches), got, full)
			}
		}
	}
}

// Records and viewOf know every field of Image: a new field fails this
// test until both carry it (or it is derived from others).
func TestRecordsCoversImage(t *testing.T) {
	known := map[string]string{
		"Offset": "FromSnapshot", "ClusterID": "FromSnapshot", "topics": "TopicRecord", "byID": "TopicRecord",
		"brokers": "RegisterBrokerRecord", "replicas": "derived from partitions", "delta": "not carried",
		"brokerConfigs": "ConfigRecord", "groupConfigs": "ConfigRecord", "NextProducerID": "ProducerIDsRecord",
		"Bootstrapped": "BootstrapRecord", "scram": "UserScramCredentialRecord", "acls": "AccessControlEntryRecord",
		"aclIndex": "derived from acls", "quotas": "ClientQuotaRecord", "features": "FeatureLevelRecord",
	}
	typ := reflect.TypeFor[Image]()
	for i := range typ.NumField() {
		if f := typ.Field(i); known[f.Name] == "" {
			t.Errorf("Image.%s is not carried by Records (snapshot.go) nor compared by viewOf", f.Name)
		}
	}
}
