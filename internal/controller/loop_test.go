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

// gatedLog holds one Append, once armed: the append waits until release
// closes, then returns err without appending, or appends when err is nil.
type gatedLog struct {
	quorum.Log
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
	err     error
}

func (g *gatedLog) Append(ctx context.Context, recs []metadata.Record) (int64, error) {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.entered)
		<-g.release
		if g.err != nil {
			return 0, g.err
		}
	}
	return g.Log.Append(ctx, recs)
}

// A write queued behind an append that fails, while this controller stays
// active, is computed again over the committed image and committed; the
// failed write alone gets the append's error. It failed with
// NOT_CONTROLLER before, though nothing was wrong with it.
func TestWriteBehindFailedAppendIsRecomputed(t *testing.T) {
	g := &gatedLog{entered: make(chan struct{}), release: make(chan struct{}), err: quorum.ErrEntryTooLarge}
	c := newLocalControllerWith(t, func(l quorum.Log) quorum.Log { g.Log = l; return g })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	registerBrokers(t, ctx, c, 1)
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
	create := func(name string) <-chan error {
		res := make(chan error, 1)
		go func() {
			errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: name, Partitions: 2, ReplicationFactor: 1}}, false)
			res <- errors.Join(append(errs, err)...)
		}()
		return res
	}
	first := create("first")
	<-g.entered
	// Queued behind "first" (the appender is busy with it): computed over
	// an image that has "first", so "second" got no conflict to check.
	computed := make(chan struct{})
	second := make(chan error, 1)
	go func() {
		second <- c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
			defer func() {
				select {
				case <-computed:
				default:
					close(computed)
				}
			}()
			if im.Topic("first") != nil {
				return []metadata.Record{metadata.TopicRecord{Name: "second-after-first", ID: metadata.UUID{9}}}, nil
			}
			return []metadata.Record{metadata.TopicRecord{Name: "second", ID: metadata.UUID{9}}}, nil
		})
	}()
	<-computed
	close(g.release)
	if err := <-first; !errors.Is(err, quorum.ErrEntryTooLarge) {
		t.Fatalf("first write: %v, want the append's error", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("write queued behind the failed append: %v", err)
	}
	im := c.Image()
	if im.Topic("first") != nil || im.Topic("second-after-first") != nil || im.Topic("second") == nil {
		t.Fatalf("topics %v, want only the recomputed second", im.TopicNames())
	}
}
