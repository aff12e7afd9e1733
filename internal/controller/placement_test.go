package controller

import (
	"slices"
	"testing"

	"github.com/samsahq/samsa/internal/metadata"
)

func TestPlaceReplicasRackAware(t *testing.T) {
	rack := func(s string) *string { return &s }
	brokers := []*metadata.Broker{
		{ID: 1, Rack: rack("a")}, {ID: 2, Rack: rack("a")}, {ID: 3, Rack: rack("b")},
		{ID: 4, Rack: rack("b")}, {ID: 5, Rack: rack("c")}, {ID: 6, Rack: rack("c")},
	}
	if got := rackAlternating(brokers); !slices.Equal(got, []int32{1, 3, 5, 2, 4, 6}) {
		t.Fatalf("order %v", got)
	}
	byID := map[int32]string{}
	for _, b := range brokers {
		byID[b.ID] = *b.Rack
	}
	for p := int32(0); p < 12; p++ {
		r := placeReplicas(brokers, p, 3)
		racks := map[string]bool{}
		for _, id := range r {
			racks[byID[id]] = true
		}
		if len(racks) != 3 {
			t.Errorf("partition %d: replicas %v on racks %v", p, r, racks)
		}
	}
	// Without racks, plain round robin.
	plain := []*metadata.Broker{{ID: 1}, {ID: 2}, {ID: 3}}
	if got := placeReplicas(plain, 1, 2); !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("plain %v", got)
	}
}
