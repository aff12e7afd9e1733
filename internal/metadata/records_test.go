package metadata

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/acl"
)

func TestACLRecordsRoundTrip(t *testing.T) {
	recs := []Record{
		AccessControlEntryRecord{ID: UUID{1}, Binding: acl.Binding{
			ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t", PatternType: kmsg.ACLResourcePatternTypePrefixed,
			Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow,
		}},
		RemoveAccessControlEntryRecord{ID: UUID{1}},
	}
	im := Empty("c")
	for _, r := range recs {
		k, v, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(k, v)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip: %+v, want %+v", got, r)
		}
		im = im.Apply(im.Offset+1, []Record{got})
		if _, ok := r.(AccessControlEntryRecord); ok && im.ACLIndex().Len() != 1 {
			t.Fatalf("index holds %d bindings after the add", im.ACLIndex().Len())
		}
	}
	if im.ACLIndex().Len() != 0 {
		t.Fatalf("index holds %d bindings after the remove", im.ACLIndex().Len())
	}
}

// FuzzDecodeACLRecords: the ACL records' decoder (and Apply of what it
// accepts) never panics on bytes from the metadata log.
func FuzzDecodeACLRecords(f *testing.F) {
	f.Add([]byte("acl"), []byte(`{"id":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"resource_type":2,"resource_name":"t","pattern_type":3,"principal":"User:a","host":"*","operation":3,"permission":3}`))
	f.Add([]byte("remove_acl"), []byte(`{"id":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`))
	f.Add([]byte("acl"), []byte(`{"id":"x"}`))
	f.Add([]byte("client_quota"), []byte(`{"entity":[{"type":"user","name":"a"}],"key":"producer_byte_rate","value":1024}`))
	f.Add([]byte("client_quota"), []byte(`{"entity":[{"type":"client-id"}],"key":"consumer_byte_rate","remove":true}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := Decode(key, value)
		if err != nil {
			return
		}
		im := Empty("c").Apply(0, []Record{r})
		a := &acl.Authorizer{Enabled: true, Index: im.ACLIndex()}
		a.Authorize("User:a", "h", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "t")
	})
}

// TestDecodePartitionFast: what Encode writes for partition records is
// read by their own decoder (not encoding/json), to the same record.
func TestDecodePartitionFast(t *testing.T) {
	for _, r := range []PartitionRecord{
		{TopicID: UUID{1, 255, 3, 15: 9}, Partition: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 4},
		{Partition: -1, Replicas: []int32{}, ISR: []int32{}, Leader: -1, AddingReplicas: []int32{4}, RemovingReplicas: []int32{1}},
		{},
	} {
		_, v, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := decodePartitionFast(v)
		if !ok || !reflect.DeepEqual(got, r) {
			t.Fatalf("%s: decoded %+v (%v), want %+v", v, got, ok, r)
		}
	}
}
