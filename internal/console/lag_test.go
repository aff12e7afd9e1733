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
		c.watchLag("g", adm)
		c.sampleLags(time.Now())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lags["g"] == nil {
		t.Fatal("no watch of g")
	}
}
