package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
)

// A write is answered once committed to the image, while this node's
// listener (the broker's apply to its logs, seconds for thousands of
// partitions) still works on it, as Kafka's QuorumController completes a
// write apart from the brokers' metadata publishers; WaitApplied waits for
// the listener. CreateTopics and DeleteTopics waited for the listener
// before: a DeleteTopics of 3,000 partitions was answered after 10-25 s,
// past the forwarding broker's and the client's timeouts, and the request
// sent again got UNKNOWN_TOPIC_OR_PARTITION for the topics it deleted.
func TestWriteAnsweredBeforeListeners(t *testing.T) {
	c := newLocalController(t)
	longSessions(c) // no fence commit comes between the writes
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	registerBrokers(t, ctx, c, 1)
	// The listener holds every commit after the first it sees until
	// release closes (closed by the cleanup too, so that Close, which
	// waits for the delivery goroutine, returns when the test fails).
	entered, release := make(chan int64, 16), make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	c.OnImage(func(old, next *metadata.Image) {
		if old == nil {
			return
		}
		if old.Offset >= next.Offset {
			t.Errorf("listener got %d after %d", next.Offset, old.Offset)
		}
		entered <- next.Offset
		<-release
	})
	for _, step := range []struct {
		name string
		do   func() error
		want func(*metadata.Image) bool
	}{
		{"create", func() error {
			errs, err := c.CreateTopics(ctx, []CreateTopic{{Name: "t", Partitions: 4, ReplicationFactor: 1}}, false)
			return errors.Join(append(errs, err)...)
		}, func(im *metadata.Image) bool { return im.Topic("t") != nil }},
		{"delete", func() error {
			errs, err := c.DeleteTopics(ctx, []string{"t"})
			return errors.Join(append(errs, err)...)
		}, func(im *metadata.Image) bool { return im.Topic("t") == nil }},
	} {
		res := make(chan error, 1)
		go func() { res <- step.do() }()
		var off int64
		select {
		case off = <-entered:
		case <-ctx.Done():
			t.Fatalf("%s: the listener was never called", step.name)
		}
		// The listener holds the commit: the write must be answered
		// meanwhile (it waited for the listener before, until ctx ended).
		select {
		case err := <-res:
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s: not answered while this node's listener applies it", step.name)
		}
		if !step.want(c.Image()) {
			t.Fatalf("%s: the image does not show it once answered", step.name)
		}
		if c.Applied().Offset >= off {
			t.Fatalf("%s: applied offset %d while the listener holds %d", step.name, c.Applied().Offset, off)
		}
		applied := make(chan bool, 1)
		go func() { applied <- c.WaitApplied(ctx, func(im *metadata.Image) bool { return im.Offset >= off }) }()
		release <- struct{}{} // the listener returns from this commit
		if !<-applied {
			t.Fatalf("%s: WaitApplied did not see the listener return", step.name)
		}
	}
}
