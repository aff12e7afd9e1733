package console

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWatchLagRace: a group's page renewing its lag watch (watchLag, with
// the viewer's client) while the sampler reads the watches; run with
// -race.
func TestWatchLagRace(t *testing.T) {
	c, err := New(Config{Addr: "127.0.0.1:1", SampleInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for range 200 {
		c.watchLag("g", "", adm)
		c.sampleLags(time.Now())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lags[lagKey{"g", ""}] == nil {
		t.Fatal("no watch of g")
	}
}

// TestLagPerPrincipal: each principal's lag chart is its own, sampled with
// its client: bob never sees the samples taken with alice's client, which
// may describe topics bob may not.
func TestLagPerPrincipal(t *testing.T) {
	c, err := New(Config{Addr: "127.0.0.1:1", SampleInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	alice, bob := kadm.NewClient(nil), kadm.NewClient(nil)
	ra := c.watchLag("g", "alice", alice)
	ra.add(time.Now(), 42, 0) // a sample taken with alice's client
	rb := c.watchLag("g", "bob", bob)
	if pts := rb.points(); len(pts) != 0 {
		t.Fatalf("bob sees %v, sampled as alice", pts)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lags[lagKey{"g", "alice"}].adm != alice || c.lags[lagKey{"g", "bob"}].adm != bob {
		t.Fatal("a principal's watch samples with another's client")
	}
}
