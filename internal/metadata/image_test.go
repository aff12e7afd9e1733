package metadata

import "testing"

func TestApplyAndEncode(t *testing.T) {
	id := UUID{1, 2, 3}
	v := "1000"
	recs := []Record{
		TopicRecord{Name: "a", ID: id},
		PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		PartitionRecord{TopicID: id, Partition: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "a", Name: "retention.ms", Value: &v},
		ProducerIDsRecord{BrokerID: 1, NextProducerID: 1000},
	}
	// Round trip every record through the log encoding.
	for i, r := range recs {
		k, val, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(k, val)
		if err != nil {
			t.Fatal(err)
		}
		if got.Type() != r.Type() {
			t.Fatalf("record %d: type %s, want %s", i, got.Type(), r.Type())
		}
		recs[i] = got
	}
	empty := Empty("c")
	im := empty.Apply(0, recs)
	tp := im.Topic("a")
	if tp == nil || len(tp.Partitions) != 2 || tp.Configs["retention.ms"] != "1000" || im.TopicByID(id) != tp {
		t.Fatalf("topic: %+v", tp)
	}
	if im.Offset != 4 || im.NextProducerID != 1000 {
		t.Fatalf("offset %d next pid %d", im.Offset, im.NextProducerID)
	}
	if empty.Topic("a") != nil {
		t.Fatal("Apply changed the old image")
	}
	v2 := "5"
	im2 := im.Apply(5, []Record{ConfigRecord{ResourceType: ResourceTopic, ResourceName: "a", Name: "retention.ms", Value: &v2}})
	if im.Topic("a").Configs["retention.ms"] != "1000" || im2.Topic("a").Configs["retention.ms"] != "5" {
		t.Fatal("copy on write broken")
	}
	im3 := im2.Apply(6, []Record{RemoveTopicRecord{ID: id}})
	if im3.Topic("a") != nil || im2.Topic("a") == nil {
		t.Fatal("remove topic")
	}
	if _, err := Decode([]byte("nope"), nil); err == nil {
		t.Fatal("unknown type decoded")
	}
}

// A FeatureLevelRecord finalizes a level; level 0 removes the feature, as
// Kafka's FeaturesImage does; images before stay as they were.
func TestFeatureLevels(t *testing.T) {
	im := Empty("c")
	if l := im.FeatureLevel(FeatureTransactionVersion); l != 0 {
		t.Fatalf("empty image: level %d", l)
	}
	im2 := im.Apply(0, []Record{FeatureLevelRecord{Name: FeatureTransactionVersion, FeatureLevel: 2}})
	if l := im2.FeatureLevel(FeatureTransactionVersion); l != 2 {
		t.Fatalf("level %d, want 2", l)
	}
	im3 := im2.Apply(1, []Record{FeatureLevelRecord{Name: FeatureTransactionVersion, FeatureLevel: 0}})
	if l := im3.FeatureLevel(FeatureTransactionVersion); l != 0 || len(im3.Features()) != 0 {
		t.Fatalf("after level 0: %v", im3.Features())
	}
	if l := im2.FeatureLevel(FeatureTransactionVersion); l != 2 {
		t.Fatalf("the older image changed: level %d", l)
	}
	if got := DefaultFeatureLevels([]Record{FeatureLevelRecord{Name: FeatureTransactionVersion, FeatureLevel: 1}}); len(got) != 0 {
		t.Fatalf("defaults over a set level: %v", got)
	}
	if got := DefaultFeatureLevels(nil); len(got) != 1 || got[0] != (FeatureLevelRecord{Name: FeatureTransactionVersion, FeatureLevel: 2}) {
		t.Fatalf("defaults: %v", got)
	}
}
