package wire

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkWriteFramed writes Fetch responses of one partition holding a
// 1 MiB region of a file (in the page cache) to a loopback TCP connection
// whose reader discards the bytes, through each write path: sendfile(2), or
// pread(2) into a pooled buffer and writev(2). Unlike the root package's
// BenchmarkFetch, no client decodes the records, so the figures compare the
// write paths alone (go test -bench WriteFramed -count 6 ./internal/wire).
func BenchmarkWriteFramed(b *testing.B) {
	const region = 1 << 20
	data := make([]byte, 64*region)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f := segmentFile(b, data)
	for _, sendfile := range []bool{false, true} {
		name := "pread+writev"
		if sendfile {
			name = "sendfile"
		}
		b.Run(name, func(b *testing.B) {
			addr, done := serveOne(b, func(c net.Conn) { io.Copy(io.Discard, c) })
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(region)
			b.ReportAllocs()
			var before, after syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			i := 0
			for b.Loop() {
				resp := &FetchResponse{FetchResponse: kmsg.NewPtrFetchResponse(), Sendfile: sendfile}
				resp.SetVersion(12)
				t := kmsg.NewFetchResponseTopic()
				t.Topic = "bench"
				t.Partitions = append(t.Partitions, kmsg.NewFetchResponseTopicPartition())
				resp.Topics = append(resp.Topics, t)
				resp.SetRecords(&resp.Topics[0].Partitions[0], FileRegion{File: f, Position: int64(i%64) * region, Length: region})
				if err := resp.WriteFramed(c, int32(i), nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
			c.Close()
			done()
			// CPU of the whole process (the discarding reader included,
			// the same for both paths) per response.
			syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// serveOne listens on a loopback port and serves its first connection with
// serve on a goroutine, closing the connection after it; wait closes the
// listener and waits for serve to return.
func serveOne(tb testing.TB, serve func(net.Conn)) (addr string, wait func()) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	return ln.Addr().String(), func() {
		ln.Close()
		<-done
	}
}
