package metadata

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/quota"
)

// imageFields holds, for every field of Image, what readers see of it in
// a form reflect.DeepEqual compares by content: plain maps and values,
// empty maps as nil (BrokerConfigs of a broker whose configs were all
// removed is an empty map, absent after a snapshot: the same for every
// reader). A nil function marks a field a snapshot does not carry (delta:
// what the last Apply changed). TestRecordsCoversImage fails for a field
// of Image missing here, for one the random logs never set, and for one
// an image built from its Records does not restore.
var imageFields = map[string]func(im *Image) any{
	"Offset":    func(im *Image) any { return im.Offset },
	"ClusterID": func(im *Image) any { return im.ClusterID },
	"topics": func(im *Image) any {
		m := map[string]Topic{}
		for n, t := range im.topics.All() {
			m[n] = *t
		}
		return nonEmpty(m)
	},
	"byID": func(im *Image) any {
		m := map[UUID]Topic{}
		for id, t := range im.byID.All() {
			m[id] = *t
		}
		return nonEmpty(m)
	},
	"brokers": func(im *Image) any {
		m := map[int32]Broker{}
		for id, b := range im.brokers {
			m[id] = *b
		}
		return nonEmpty(m)
	},
	"replicas":       func(im *Image) any { return nonEmpty(maps.Clone(im.replicas)) },
	"delta":          nil,
	"brokerConfigs":  func(im *Image) any { return nonEmptyConfigs(im.brokerConfigs) },
	"groupConfigs":   func(im *Image) any { return nonEmptyConfigs(im.groupConfigs) },
	"NextProducerID": func(im *Image) any { return im.NextProducerID },
	"Bootstrapped":   func(im *Image) any { return im.Bootstrapped },
	"scram":          func(im *Image) any { return nonEmpty(maps.Clone(im.scram)) },
	"acls":           func(im *Image) any { return nonEmpty(maps.Clone(im.acls)) },
	"aclIndex":       func(im *Image) any { return leaves(reflect.ValueOf(im.aclIndex), "") },
	"quotas": func(im *Image) any {
		m := map[string]quota.EntityQuotas{}
		for k, q := range im.quotas {
			m[k] = *q
		}
		return nonEmpty(m)
	},
	"features": func(im *Image) any { return nonEmpty(maps.Clone(im.features)) },
}

func nonEmpty[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return nil
	}
	return m
}

func nonEmptyConfigs(cs map[string]map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for n, m := range cs {
		if len(m) > 0 {
			out[n] = m
		}
	}
	return nonEmpty(out)
}

// leaves lists the values under v with the map keys and field names
// leading to them, sorted: the content of a structure whose slices'
// order does not matter (acl.Index, built from a map). Unexported fields
// are read through reflection.
func leaves(v reflect.Value, path string) []string {
	var out []string
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			out = leaves(v.Elem(), path)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			out = append(out, leaves(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			out = append(out, leaves(it.Value(), fmt.Sprintf("%s[%v]", path, it.Key()))...)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			out = append(out, leaves(v.Index(i), path+"[]")...)
		}
	default:
		out = append(out, fmt.Sprintf("%s=%v", path, v))
	}
	slices.Sort(out)
	return out
}

// viewOf is im as imageFields see it, by field name.
func viewOf(im *Image) map[string]any {
	v := map[string]any{}
	for name, f := range imageFields {
		if f != nil {
			v[name] = f(im)
		}
	}
	return v
}

// diffFields names the fields in which two views differ.
func diffFields(a, b map[string]any) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(a)) {
		if !reflect.DeepEqual(a[name], b[name]) {
			out = append(out, fmt.Sprintf("%s: %+v, want %+v", name, a[name], b[name]))
		}
	}
	return out
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
			if d := diffFields(viewOf(im), viewOf(FromSnapshot("c", offsets[k], rt))); d != nil {
				t.Fatalf("seed %d cut %d: Apply and FromSnapshot differ: %v", seed, k, d)
			}
			if d := diffFields(viewOf(im), viewOf(images[k])); k > 0 && d != nil {
				t.Fatalf("seed %d cut %d: snapshot image differs: %v", seed, k, d)
			}
			for i, b := range batches[k:] {
				im = im.Apply(bases[k+i], b)
			}
			if d := diffFields(viewOf(im), full); d != nil {
				t.Fatalf("seed %d cut %d of %d: snapshot + tail differs from the full replay: %v", seed, k, len(batches), d)
			}
		}
	}
}

// Records carries every field of Image: each field has an entry in
// imageFields, is set by some random log, and an image rebuilt from the
// Records of any image of those logs restores it. A field added to Image
// fails this test until imageFields compares it, recordGen draws the
// record that sets it and Records writes that record.
func TestRecordsCoversImage(t *testing.T) {
	typ := reflect.TypeFor[Image]()
	for i := range typ.NumField() {
		if _, ok := imageFields[typ.Field(i).Name]; !ok {
			t.Errorf("Image.%s has no entry in imageFields: say how to compare it, and carry it in Records (snapshot.go)", typ.Field(i).Name)
		}
	}
	set := map[string]bool{}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 630))
		g := &recordGen{r: r, live: map[string]UUID{}}
		im := Empty("c")
		for range 60 {
			b := make([]Record, r.IntN(4)+1)
			for i := range b {
				b[i] = g.record()
			}
			im = im.Apply(im.Offset+1, roundTrip(t, b))
			snap := FromSnapshot("c", im.Offset+1, roundTrip(t, im.Records()))
			for name, f := range imageFields {
				if f == nil {
					continue
				}
				got, want := f(snap), f(im)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d: Image.%s not restored from Records:\n%+v\nwant\n%+v", seed, name, got, want)
				}
				if v := reflect.ValueOf(want); v.IsValid() && !v.IsZero() && (v.Kind() != reflect.Slice && v.Kind() != reflect.Map || v.Len() > 0) {
					set[name] = true
				}
			}
		}
	}
	for name, f := range imageFields {
		if f != nil && !set[name] {
			t.Errorf("Image.%s is never set by recordGen's logs: draw the record that sets it", name)
		}
	}
}
