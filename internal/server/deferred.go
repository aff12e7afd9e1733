package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxDeferred bounds the deferred responses a connection holds at once:
// the Produce requests it goes on handling while earlier ones wait for
// replication. It is the producer's own bound, Kafka's
// max.in.flight.requests.per.connection limit of 5 for idempotence.
const maxDeferred = 5

// Deferred is a response that completes after its handler returned: a
// Produce with acks=all whose records are appended and which waits for
// the in-sync replicas (the high-watermark). The connection goes on
// reading and handling the Produce requests that follow it, up to
// maxDeferred waiting at once, so that their appends overlap the
// replication of the earlier ones; it writes every response in request
// order, and handles a request of another API only once every earlier
// response is written. Kafka's brokers mute a connection until its
// response is sent, so a producer's pipelined requests wait for each
// other's replication there; here only their responses do.
//
// The embedded Response is the response being completed; nothing but the
// wait may touch it until the connection calls Finish.
type Deferred struct {
	kmsg.Response
	done   chan struct{}
	remote time.Duration
	// Finish, when not nil, runs on the connection's goroutine once the
	// wait returned, before the response is written, and returns the
	// response to write (the broker applies its authorization gates and
	// quotas there, as it does to other responses).
	Finish func(kmsg.Response) kmsg.Response
}

// Defer returns a Deferred for resp and runs wait on a goroutine of its
// own; wait fills resp and returns when it is complete, at the latest
// soon after ctx, the connection's context given to the handler, is done
// (the connection waits for it before it closes). Its duration counts as
// the request's remote time.
func Defer(resp kmsg.Response, wait func()) *Deferred {
	d := &Deferred{Response: resp, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		start := time.Now()
		wait()
		d.remote = time.Since(start)
	}()
	return d
}

// Done is closed once the wait returned.
func (d *Deferred) Done() <-chan struct{} { return d.done }
