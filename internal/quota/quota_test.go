package quota

import (
	"testing"
	"time"
)

func sp(s string) *string { return &s }

func TestResolvePrecedence(t *testing.T) {
	// Every level set, each to its own value: removing the best match in
	// turn walks down Kafka's order.
	levels := []Entity{
		{{EntityClientID, sp("c")}, {EntityUser, sp("u")}},
		{{EntityClientID, nil}, {EntityUser, sp("u")}},
		{{EntityUser, sp("u")}},
		{{EntityClientID, sp("c")}, {EntityUser, nil}},
		{{EntityClientID, nil}, {EntityUser, nil}},
		{{EntityUser, nil}},
		{{EntityClientID, sp("c")}},
		{{EntityClientID, nil}},
	}
	buckets := []string{`client-id="c",user="u"`, `client-id="c",user="u"`, `user="u"`, `client-id="c",user="u"`, `client-id="c",user="u"`, `user="u"`, `client-id="c"`, `client-id="c"`}
	cs := Configs{}
	for i, e := range levels {
		cs[e.Normalize().Key()] = &EntityQuotas{Entity: e, Values: map[string]float64{ProducerByteRate: float64(i + 1)}}
	}
	for i, e := range levels {
		v, bucket, ok := cs.Resolve(ProducerByteRate, "u", "c")
		if !ok || v != float64(i+1) || bucket != buckets[i] {
			t.Errorf("level %d (%s): got %v %q %v, want %v %q", i, e.Key(), v, bucket, ok, i+1, buckets[i])
		}
		delete(cs, e.Normalize().Key())
	}
	if _, _, ok := cs.Resolve(ProducerByteRate, "u", "c"); ok {
		t.Error("resolved with no quota")
	}
}

func TestKeyCannotBeForged(t *testing.T) {
	a := Entity{{EntityClientID, sp(`a",user="b`)}}.Key()
	b := Entity{{EntityClientID, sp("a")}, {EntityUser, sp("b")}}.Key()
	if a == b {
		t.Fatalf("client id %q forges the key of a user and client entity", a)
	}
}

func TestValidate(t *testing.T) {
	v := 1024.0
	frac := 1.5
	tests := []struct {
		e    Entity
		key  string
		v    *float64
		fail bool
	}{
		{Entity{{EntityUser, sp("u")}}, ProducerByteRate, &v, false},
		{Entity{{EntityUser, nil}, {EntityClientID, nil}}, RequestPercentage, &frac, false},
		{Entity{{EntityIP, sp("10.0.0.1")}}, ConnectionCreationRate, &v, false},
		{Entity{{EntityIP, nil}, {EntityUser, nil}}, ConnectionCreationRate, &v, true},
		{Entity{{EntityUser, nil}}, ConnectionCreationRate, &v, true},
		{Entity{{EntityIP, nil}}, ProducerByteRate, &v, true},
		{Entity{{EntityUser, nil}}, "bogus", &v, true},
		{Entity{{"group", nil}}, ProducerByteRate, &v, true},
		{Entity{{EntityUser, nil}, {EntityUser, sp("x")}}, ProducerByteRate, &v, true},
		{Entity{}, ProducerByteRate, &v, true},
		{Entity{{EntityUser, nil}}, ProducerByteRate, &frac, true},
		{Entity{{EntityUser, nil}}, ProducerByteRate, new(float64), true},
		{Entity{{EntityUser, nil}}, ProducerByteRate, nil, false},
	}
	for i, tc := range tests {
		if err := Validate(tc.e, tc.key, tc.v); (err != nil) != tc.fail {
			t.Errorf("case %d (%s %s): err %v, want failure %v", i, tc.e.Key(), tc.key, err, tc.fail)
		}
	}
}

func TestRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r Rate
	// 10 windows' worth at the start: the window is padded to 10 s.
	r.Record(1000, t0)
	if got := r.Measure(t0); got != 100 {
		t.Fatalf("rate %v, want 100 (1000 over the padded 10 s)", got)
	}
	if d := r.Throttle(100, t0); d != 0 {
		t.Fatalf("throttled %v at the limit", d)
	}
	r.Record(1000, t0.Add(500*time.Millisecond))
	// 2000 over 10.5 s = 190.5/s against 100/s: (190.5-100)/100 × 10.5 s.
	d := r.Throttle(100, t0.Add(500*time.Millisecond))
	if d < 9400*time.Millisecond || d > 9600*time.Millisecond {
		t.Fatalf("throttle %v, want about 9.5 s", d)
	}
	// Once the samples are older than 11 windows they no longer count.
	if got := r.Measure(t0.Add(12 * time.Second)); got != 0 {
		t.Fatalf("rate %v after the samples expired", got)
	}
}

// TestWindow: quota.window.num and quota.window.size.seconds set through
// Buckets.Window: 3 windows of 2 s pad the rate's window to 4 s and
// expire samples after 6 s; the token bucket holds rate × 3 × 2 s.
func TestWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bs := Buckets{Window: Window{Num: 3, Size: 2 * time.Second}}
	b := bs.Get("u", t0)
	b.Rate.Record(400, t0)
	if got := b.Rate.Measure(t0); got != 100 {
		t.Fatalf("rate %v, want 100 (400 over the padded 2 × 2 s)", got)
	}
	if got := b.Rate.Measure(t0.Add(5 * time.Second)); got != 80 {
		t.Fatalf("rate %v at 5 s, want 80 (400 over 5 s)", got)
	}
	if got := b.Rate.Measure(t0.Add(6 * time.Second)); got != 0 {
		t.Fatalf("rate %v at 6 s, want 0 (the sample left the 3 × 2 s)", got)
	}
	b.Tokens.Record(60, 10, t0) // a burst of 10 × 3 × 2 = 60 tokens
	if b.Tokens.Exceeded(10, t0) {
		t.Fatal("60 tokens exceeded a bucket of 60")
	}
	b.Tokens.Record(1, 10, t0)
	if !b.Tokens.Exceeded(10, t0) {
		t.Fatal("61 tokens did not exceed a bucket of 60")
	}
	var zero Rate // Kafka's defaults: 11 windows of 1 s
	zero.Record(1000, t0)
	if got := zero.Measure(t0); got != 100 {
		t.Fatalf("zero Rate: %v, want 100", got)
	}
}
