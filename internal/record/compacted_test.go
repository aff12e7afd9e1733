package record

import "testing"

// TestBuildCompacted checks the two Spec fields the log cleaner uses: an
// explicit last offset delta past the last record, and the delete horizon
// attribute with record timestamps relative to it.
func TestBuildCompacted(t *testing.T) {
	recs := []Record{
		{OffsetDelta: 1, TimestampDelta: -500, Key: []byte("a"), Value: []byte("1")},
		{OffsetDelta: 3, TimestampDelta: -400, Key: []byte("b")},
	}
	b, err := Build(Spec{
		BaseOffset: 100, BaseTimestamp: 10_000, LastOffsetDelta: 9, DeleteHorizon: true,
		ProducerID: 7, ProducerEpoch: 2, BaseSequence: 40,
	}, recs)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.LastOffsetDelta != 9 || h.NumRecords != 2 || h.Attributes&DeleteHorizonBit == 0 {
		t.Fatalf("header %+v", h)
	}
	if h.BaseTimestamp != 10_000 || h.MaxTimestamp != 9_600 {
		t.Fatalf("base timestamp %d, max %d; want 10000, 9600", h.BaseTimestamp, h.MaxTimestamp)
	}
	var got []int64
	if err := Records(b, func(r Record) error {
		got = append(got, r.Offset, r.Timestamp)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []int64{101, 9_500, 103, 9_600}; len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("records %v, want %v", got, want)
	}

	// An emptied batch keeps its offset range.
	e, err := Build(Spec{BaseOffset: 5, BaseTimestamp: 77, LastOffsetDelta: 4, ProducerID: 1, BaseSequence: 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := Validate(e); err != nil || h.NumRecords != 0 || h.LastOffset() != 9 || h.MaxTimestamp != 77 {
		t.Fatalf("empty batch %+v, %v", h, err)
	}
}
