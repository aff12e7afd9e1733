package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/wire"
)

// produceRequest is a Produce v9 request whose one partition's records are
// n bytes filled with the byte fill, the correlation id in the first four.
func produceRequest(id int32, n int, fill byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = 1
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "t"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = bytes.Repeat([]byte{fill}, n)
	binary.BigEndian.PutUint32(p.Records, uint32(id))
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return kmsg.NewRequestFormatter().AppendRequest(nil, req, id)
}

// produceServer answers Produce requests after checking that their records
// are the ones produceRequest built for their correlation id; bad counts
// those that are not.
func produceServer(tb testing.TB, bad *atomic.Int64) *Server {
	tb.Helper()
	v := wire.NewVersions()
	v.Add(kmsg.Produce, 3, 11)
	h := handlerFunc(func(_ context.Context, _ *Conn, req *wire.Request) (kmsg.Response, error) {
		pr := req.Body.(*kmsg.ProduceRequest)
		recs := pr.Topics[0].Partitions[0].Records
		fill := byte(req.CorrelationID)
		if int32(binary.BigEndian.Uint32(recs)) != req.CorrelationID || recs[len(recs)-1] != fill || recs[len(recs)/2] != fill {
			bad.Add(1)
		}
		return pr.ResponseKind(), nil
	})
	s, err := Listen(Config{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Handler: h, Versions: v, MaxRequestBytes: 64 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// pipeline writes count produce requests of size bytes with up to inflight
// unanswered, and reads every response.
func pipeline(tb testing.TB, addr string, count, size, inflight int) {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	frames := make([][]byte, 4)
	for i := range frames {
		frames[i] = produceRequest(int32(i), size, byte(i))
	}
	errs := make(chan error, 1)
	go func() {
		var buf []byte
		for i := 0; i < count; i++ {
			var err error
			if buf, err = wire.ReadFrame(c, buf, 1<<20); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	sent := make(chan struct{}, inflight)
	for i := 0; i < count; i++ {
		sent <- struct{}{}
		// Correlation ids cycle over the prepared frames.
		if _, err := c.Write(frames[i%len(frames)]); err != nil {
			tb.Fatal(err)
		}
		if i >= inflight-1 {
			<-sent
		}
	}
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
}

// TestProduceFramesReused: with produce frames read into recycled
// buffers, every handler still sees its own request's records, however
// many requests are read ahead.
func TestProduceFramesReused(t *testing.T) {
	var bad atomic.Int64
	s := produceServer(t, &bad)
	pipeline(t, s.Addr().String(), 200, 100_000, 8)
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d requests saw records of another request", n)
	}
}

// BenchmarkProduceFrames: pipelined 1 MiB produce requests through one
// connection's read loop, the handler touching the records.
func BenchmarkProduceFrames(b *testing.B) {
	var bad atomic.Int64
	s := produceServer(b, &bad)
	const size = 1 << 20
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	pipeline(b, s.Addr().String(), b.N, size, 4)
	if n := bad.Load(); n != 0 {
		b.Fatalf("%d requests saw records of another request", n)
	}
}

// TestProduceFrameKeptWhileHandled: while the first request's handler is
// held, the reader reads the following requests ahead; none of them may be
// read into the frame the held handler is still looking at.
func TestProduceFrameKeptWhileHandled(t *testing.T) {
	v := wire.NewVersions()
	v.Add(kmsg.Produce, 3, 11)
	release := make(chan struct{})
	var bad atomic.Int64
	h := handlerFunc(func(_ context.Context, _ *Conn, req *wire.Request) (kmsg.Response, error) {
		pr := req.Body.(*kmsg.ProduceRequest)
		if req.CorrelationID == 0 {
			<-release
		}
		recs := pr.Topics[0].Partitions[0].Records
		if int32(binary.BigEndian.Uint32(recs)) != req.CorrelationID || recs[len(recs)-1] != byte(req.CorrelationID) {
			bad.Add(1)
		}
		return pr.ResponseKind(), nil
	})
	s, err := Listen(Config{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Handler: h, Versions: v, MaxRequestBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	// readAhead+1 frames of 4 MiB: far more than the socket buffers hold,
	// so the writes return only once the reader has read them all, into
	// buffers of its own.
	const n = readAhead + 1
	for i := range int32(n + 1) {
		if _, err := c.Write(produceRequest(i, 4<<20, byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	var buf []byte
	for range n + 1 {
		if buf, err = wire.ReadFrame(c, buf, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if b := bad.Load(); b != 0 {
		t.Fatalf("%d handlers saw another request's records", b)
	}
}
