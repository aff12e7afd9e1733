package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quorum"
)

// bootFailLog fails the appends of bootstrap records without a broker
// registration (writeBootstrap's) while fails is above zero, counting
// them down, or always while hold is set; it counts every such append.
type bootFailLog struct {
	quorum.Log
	mu       sync.Mutex
	fails    int
	hold     bool
	attempts int
	commits  [][]metadata.Record // every append that went through
}

var errInjected = errors.New("injected append failure")

func (l *bootFailLog) Append(ctx context.Context, recs []metadata.Record) (int64, error) {
	l.mu.Lock()
	boot, register := false, false
	for _, r := range recs {
		switch r.(type) {
		case metadata.BootstrapRecord:
			boot = true
		case metadata.RegisterBrokerRecord:
			register = true
		}
	}
	if boot && !register {
		l.attempts++
		if l.hold || l.fails > 0 {
			l.fails--
			l.mu.Unlock()
			return 0, errInjected
		}
	}
	l.commits = append(l.commits, recs)
	l.mu.Unlock()
	return l.Log.Append(ctx, recs)
}

func (l *bootFailLog) bootAttempts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempts
}

// writeBootstrap tries again after a failed append (100 ms, then 200 ms
// later) until the bootstrap records are committed.
func TestWriteBootstrapRetries(t *testing.T) {
	fl := &bootFailLog{fails: 2}
	c := openLocalController(t, func(q quorum.Log) quorum.Log { fl.Log = q; return fl })
	waitController(t, c, func() bool { return c.Active() && c.Image().Bootstrapped })
	if n := fl.bootAttempts(); n != 3 {
		t.Fatalf("%d appends of the bootstrap records, want 3 (two failed)", n)
	}
}

// A broker that registers before writeBootstrap committed the bootstrap
// records (its appends fail) commits them with its registration, first:
// Kafka's controller writes them at activation, before any registration.
// The registration committed alone before, the image not bootstrapped.
func TestRegisterBeforeBootstrapWritesItFirst(t *testing.T) {
	fl := &bootFailLog{hold: true}
	c := openLocalController(t, func(q quorum.Log) quorum.Log { fl.Log = q; return fl })
	waitController(t, c, func() bool { return c.Active() && fl.bootAttempts() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	epoch, err := c.RegisterBroker(ctx, 1, incarnation(1), -1, []metadata.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9001}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	im := c.Image()
	if !im.Bootstrapped {
		t.Fatal("a registration committed before the bootstrap records")
	}
	if b := im.Broker(1); b == nil || b.Epoch != epoch {
		t.Fatalf("broker 1 %+v, want epoch %d", b, epoch)
	}
	fl.mu.Lock()
	last := fl.commits[len(fl.commits)-1]
	fl.mu.Unlock()
	if _, ok := last[0].(metadata.BootstrapRecord); !ok {
		t.Fatalf("the registration's commit starts with %T, want the bootstrap record", last[0])
	}
	if reg, ok := last[len(last)-1].(metadata.RegisterBrokerRecord); !ok || reg.Epoch != epoch {
		t.Fatalf("the registration's commit ends with %+v, want its registration at epoch %d", last[len(last)-1], epoch)
	}
}
