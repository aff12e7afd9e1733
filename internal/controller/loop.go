package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quorum"
)

// The controller's writes run on one goroutine, the loop (as the
// coordinators' actors and etcd-io/raft's node.run): a write posts a
// function to it; the loop runs the function against the latest image,
// the committed one plus the records of this controller's writes still in
// flight, so the next write never waits for the previous one's commit.
// The records go to one appender goroutine, which appends them to the
// metadata log in order (several queued writes in one entry); a write
// whose append returned is parked by its last offset and completed when
// the committed image reaches it. No lock is held across a commit: a
// heartbeat that changes nothing is answered by the loop at once, even
// while a CreateTopics of 100,000 partitions is being committed.
//
// A failed append fails its own writes, with the append's error or
// ErrNotController. The writes queued behind it were computed over records
// that will not be: the loop starts over from the committed image and
// computes them again, as it does for the queued writes of a leadership
// that changed; while this controller is not active they fail with
// ErrNotController, which the caller retries on the new one.

// maxGroupRecords bounds the records of queued writes appended as one
// entry (a single larger write goes alone); 2,000 partition records are
// about 160 KB, far below quorum.MaxEntryBytes.
const maxGroupRecords = 2000

// writeReq is one write posted to the loop.
type writeReq struct {
	ctx context.Context
	// fn computes the records over im, on the loop; an error fails the
	// write with nothing appended.
	fn func(im *metadata.Image) ([]metadata.Record, error)
	// then, when set, runs on the loop once the records are committed.
	then func()
	// barrier: a write of no records completes only once the writes
	// before it did (it fails with them).
	barrier bool
	ran     chan struct{} // closed once fn ran, or will never run
	done    chan error    // the outcome, buffered
}

// job is the records of one write, queued for or handed to the appender.
type job struct {
	req  *writeReq
	recs []metadata.Record
	gen  int64 // leadership generation the records were computed in
	// off is the offset of the first record, set once appended.
	off int64
	// barriers are writes of no records completed with this job.
	barriers []*writeReq
}

// finish completes j's write and the barriers behind it with err.
func (j *job) finish(err error) {
	if err == nil && j.req.then != nil {
		j.req.then()
	}
	j.req.done <- err
	for _, r := range j.barriers {
		r.done <- err
	}
}

// lastJob is the latest write in flight, nil when none.
func (s *loopState) lastJob() *job {
	switch {
	case len(s.queued) > 0:
		return s.queued[len(s.queued)-1]
	case len(s.appending) > 0:
		return s.appending[len(s.appending)-1]
	case len(s.parked) > 0:
		return s.parked[len(s.parked)-1]
	}
	return nil
}

// appendResult is the appender's answer for a group of jobs appended as
// one entry.
type appendResult struct {
	jobs []*job
	off  int64
	err  error
}

// loopState is owned by the loop goroutine.
type loopState struct {
	// queued are computed jobs not yet handed to the appender.
	queued []*job
	// appending is the group the appender works on, nil when idle.
	appending []*job
	// parked are appended jobs waiting for the committed image to reach
	// their last offset, in offset order.
	parked []*job
	// spec is the committed image plus the records of queued, appending
	// and parked jobs; nil when none is in flight (then the committed
	// image is the latest).
	spec *metadata.Image
	// gen is the leadership generation (Controller.leaderGen) the loop
	// last saw.
	gen int64
}

// write runs fn on the loop over the latest image, appends its records
// and waits until the committed image holds them. It returns fn's error,
// ErrNotController when this controller is not active (only checked when
// there are records to write), the append's error or ctx.Err(). Values fn
// stores are safe to read once write returns.
func (c *Controller) write(ctx context.Context, fn func(im *metadata.Image) ([]metadata.Record, error)) error {
	return c.writeThen(ctx, fn, nil)
}

// writeThen is write with then run on the loop after the commit (state
// only the loop touches, such as brokerIncarnation).
func (c *Controller) writeThen(ctx context.Context, fn func(im *metadata.Image) ([]metadata.Record, error), then func()) error {
	return c.post(ctx, &writeReq{ctx: ctx, fn: fn, then: then})
}

// writeBarrier is write where a result of no records still waits for the
// writes posted before it to commit.
func (c *Controller) writeBarrier(ctx context.Context, fn func(im *metadata.Image) ([]metadata.Record, error)) error {
	return c.post(ctx, &writeReq{ctx: ctx, fn: fn, barrier: true})
}

func (c *Controller) post(ctx context.Context, r *writeReq) error {
	if err := c.submit(ctx, r); err != nil {
		return err
	}
	return c.await(ctx, r)
}

// submit hands r to the loop and waits until its fn ran.
func (c *Controller) submit(ctx context.Context, r *writeReq) error {
	r.ran, r.done = make(chan struct{}), make(chan error, 1)
	select {
	case c.reqc <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.loopDone:
		return ErrNotController
	}
	// fn writes what the caller reads: wait until it ran (the loop does
	// no I/O, so this is short) even when ctx ends.
	select {
	case <-r.ran:
	case <-c.loopDone:
		select {
		case <-r.ran:
		default:
			return ErrNotController
		}
	}
	return nil
}

// await waits for the outcome of r, submitted.
func (c *Controller) await(ctx context.Context, r *writeReq) error {
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.loopDone:
		select {
		case err := <-r.done:
			return err
		default:
			return ErrNotController
		}
	}
}

// chunkRecords bounds the partition records of one chunk of a fence: one
// metadata commit each (maxGroupRecords).
const chunkRecords = maxGroupRecords

// writeChunks writes what is too large for one metadata commit (the
// fence of a broker in 30,000 partitions: as many PartitionRecords) as a
// run of writes: fn runs on the loop over the latest image, which holds
// the chunks before (committed or in flight), again and again until it
// returns no records, and each chunk is appended and committed as it
// comes, without waiting for the commit of the one before. The brokers
// apply the first chunks while the next are replicated, and no entry
// holds the quorum leader's loop, its followers' fsync or their metadata
// listeners for seconds (a 30,000-record entry made a leader miss its
// followers' heartbeats and step down). fn must make progress: over the
// image its records make, it returns other records or none. It returns
// the first error: fn's, ErrNotController, the append's or ctx.Err().
// The chunks run under ctx: a caller that stops waiting stops them.
func (c *Controller) writeChunks(ctx context.Context, fn func(im *metadata.Image) ([]metadata.Record, error)) error {
	var reqs []*writeReq
	for {
		var n atomic.Int64 // records of the last computation (the loop may compute it again)
		// A barrier: the last, of no records, completes once the writes
		// before it did, among them chunks of an earlier writeChunks of
		// the same records that it found in flight.
		r := &writeReq{ctx: ctx, barrier: true, fn: func(im *metadata.Image) ([]metadata.Record, error) {
			recs, err := fn(im)
			n.Store(int64(len(recs)))
			return recs, err
		}}
		if err := c.submit(ctx, r); err != nil {
			return err
		}
		reqs = append(reqs, r)
		if n.Load() == 0 {
			break
		}
		select {
		case err := <-r.done:
			// Failed without being queued (not active, ctx ended):
			// computing the next chunk over the same image would
			// repeat this one.
			if err != nil {
				return err
			}
			r.done <- nil
		default:
		}
	}
	for _, r := range reqs {
		if err := c.await(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// kickLoop tells the loop that the committed image or the leadership
// changed; it never blocks.
func (c *Controller) kickLoop() {
	select {
	case c.kickc <- struct{}{}:
	default:
	}
}

// run is the loop. It ends when stopc closes, failing what waits.
func (c *Controller) run(ctx context.Context) {
	defer close(c.loopDone)
	var s loopState
	appendc := make(chan []*job)
	resultc := make(chan appendResult)
	appenderDone := make(chan struct{})
	go c.appender(ctx, appendc, resultc, appenderDone)
	defer func() {
		close(appendc)
		if s.appending != nil {
			<-resultc
		}
		<-appenderDone
		for _, j := range append(append(s.parked, s.appending...), s.queued...) {
			j.finish(ErrNotController)
		}
	}()
	s.gen = c.leaderGen.Load()
	for {
		// Hand the appender the next group.
		var sendc chan []*job
		var group []*job
		if s.appending == nil && len(s.queued) > 0 {
			n, recs := 0, 0
			for n < len(s.queued) && (n == 0 || recs+len(s.queued[n].recs) <= maxGroupRecords) {
				recs += len(s.queued[n].recs)
				n++
			}
			group, sendc = s.queued[:n], appendc
		}
		select {
		case <-ctx.Done():
			return
		case sendc <- group:
			s.appending = group
			s.queued = s.queued[len(group):]
		case res := <-resultc:
			s.appending = nil
			if res.err != nil {
				c.failFrom(&s, res)
			} else {
				off := res.off
				for _, j := range res.jobs {
					j.off = off
					off += int64(len(j.recs))
					s.parked = append(s.parked, j)
				}
			}
			c.completeParked(&s)
		case <-c.kickc:
			c.syncGen(&s)
			c.completeParked(&s)
		case r := <-c.reqc:
			c.syncGen(&s)
			c.runWrite(&s, r)
		}
	}
}

// syncGen drops the queued writes of a leadership that changed: they were
// computed over an image this controller may no longer extend.
func (c *Controller) syncGen(s *loopState) {
	g := c.leaderGen.Load()
	if g == s.gen {
		return
	}
	s.gen = g
	c.recompute(s)
}

// recompute computes the queued writes again over the committed image and
// the jobs appended before them (it drops their records first): they were
// computed over records that will not be appended, or in a leadership
// generation that ended. A barrier waiting on one of them waits on the
// write before it instead.
func (c *Controller) recompute(s *loopState) {
	queued := s.queued
	s.queued = nil
	c.rebuildSpec(s)
	for _, j := range queued {
		c.compute(s, j.req)
		for _, r := range j.barriers {
			c.queueBarrier(s, r)
		}
	}
}

// queueBarrier completes barrier r with the latest write in flight, at
// once when there is none.
func (c *Controller) queueBarrier(s *loopState, r *writeReq) {
	if j := s.lastJob(); j != nil {
		j.barriers = append(j.barriers, r)
		return
	}
	r.done <- nil
}

// runWrite computes one write and queues its records.
func (c *Controller) runWrite(s *loopState, r *writeReq) {
	defer close(r.ran)
	c.compute(s, r)
}

// compute runs r's fn over the latest image and queues its records, or
// completes r when there are none or it failed.
func (c *Controller) compute(s *loopState, r *writeReq) {
	if err := r.ctx.Err(); err != nil {
		r.done <- err
		return
	}
	im := s.spec
	if im == nil {
		im = c.image.Load()
	}
	recs, err := r.fn(im)
	switch {
	case err != nil:
		r.done <- err
		return
	case len(recs) == 0:
		if r.barrier {
			c.queueBarrier(s, r)
			return
		}
		r.done <- nil
		return
	case !c.Active():
		r.done <- ErrNotController
		return
	}
	// Nominal offsets: the real ones are known once appended.
	s.spec = im.Apply(im.Offset+1, recs)
	s.queued = append(s.queued, &job{req: r, recs: recs, gen: s.gen})
}

// failFrom fails the jobs of a failed append and computes the jobs queued
// behind them again, over the committed image and the parked jobs.
func (c *Controller) failFrom(s *loopState, res appendResult) {
	err := res.err
	if errors.Is(err, quorum.ErrNotLeader) {
		err = fmt.Errorf("%w: %v", ErrNotController, err)
	}
	for _, j := range res.jobs {
		j.finish(err)
	}
	s.gen = c.leaderGen.Load()
	c.recompute(s)
}

// rebuildSpec recomputes the speculative image from the committed one and
// the jobs still in flight (appending ones are counted once appended).
func (c *Controller) rebuildSpec(s *loopState) {
	s.spec = nil
	if len(s.parked) == 0 && len(s.appending) == 0 && len(s.queued) == 0 {
		return
	}
	im := c.image.Load()
	for _, j := range s.parked {
		if last := j.off + int64(len(j.recs)) - 1; last > im.Offset {
			im = im.Apply(j.off, j.recs)
		}
	}
	for _, j := range s.appending {
		im = im.Apply(im.Offset+1, j.recs)
	}
	for _, j := range s.queued {
		im = im.Apply(im.Offset+1, j.recs)
	}
	s.spec = im
}

// completeParked completes the parked jobs the committed image holds.
func (c *Controller) completeParked(s *loopState) {
	committed := c.image.Load().Offset
	n := 0
	for n < len(s.parked) && s.parked[n].off+int64(len(s.parked[n].recs))-1 <= committed {
		s.parked[n].finish(nil)
		n++
	}
	if n > 0 {
		s.parked = append(s.parked[:0], s.parked[n:]...)
	}
	if len(s.parked) == 0 && s.appending == nil && len(s.queued) == 0 {
		s.spec = nil // the committed image is the latest again
	}
}

// appender appends groups of jobs, one at a time and in order, as one
// entry each.
func (c *Controller) appender(ctx context.Context, appendc <-chan []*job, resultc chan<- appendResult, done chan<- struct{}) {
	defer close(done)
	for group := range appendc {
		res := appendResult{jobs: group}
		if !c.active.Load() || group[0].gen != c.leaderGen.Load() {
			res.err = ErrNotController
		} else {
			var recs []metadata.Record
			if len(group) == 1 {
				recs = group[0].recs
			} else {
				for _, j := range group {
					recs = append(recs, j.recs...)
				}
			}
			start := time.Now()
			res.off, res.err = c.log.Append(ctx, recs)
			if d := time.Since(start); d > slowAppend {
				c.logger.Info("slow metadata commit", "records", len(recs), "writes", len(group), "duration", d.Round(time.Millisecond), "err", res.err)
			}
		}
		select {
		case resultc <- res:
		case <-ctx.Done():
			// The loop is ending; it reads the result of the group it
			// handed out.
			resultc <- res
		}
	}
}
