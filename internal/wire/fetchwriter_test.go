package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// segmentFile is a file holding data, closed when tb ends.
func segmentFile(tb testing.TB, data []byte) *os.File {
	tb.Helper()
	f, err := os.Create(filepath.Join(tb.TempDir(), "segment.log"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	if _, err := f.Write(data); err != nil {
		tb.Fatal(err)
	}
	return f
}

// fetchConn is a loopback TCP connection whose far end hands back each
// frame it reads.
func fetchConn(t *testing.T) (net.Conn, <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan []byte, 1)
	go func() {
		defer close(frames)
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return
			}
			frame := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(c, frame); err != nil {
				return
			}
			frames <- frame
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		for range frames {
		}
	})
	return c, frames
}

// TestWriteFramed: both write paths splice each partition's region of the
// file in place of its marker, in flexible and non-flexible versions, for
// regions smaller than, equal to and larger than the buffered path's
// buffer, and for many small regions that share it.
func TestWriteFramed(t *testing.T) {
	data := make([]byte, 4*bufSize)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	f := segmentFile(t, data)
	type region struct{ pos, n int64 }
	many := make([]region, 3000)
	for i := range many {
		many[i] = region{int64(i) * 997, int64(i%700) + 1}
	}
	for _, tc := range []struct {
		name    string
		regions []region
	}{
		{"one small", []region{{5, 100}}},
		{"empty", []region{{0, 0}}},
		{"exactly the buffer", []region{{3, bufSize}}},
		{"larger than the buffer", []region{{1, 2*bufSize + 17}}},
		{"across the buffer's end", []region{{0, bufSize - 10}, {7, 30}, {0, 0}, {11, bufSize + 5}}},
		{"many small", many},
	} {
		for _, version := range []int16{4, 12} {
			for _, sendfile := range []bool{false, true} {
				name := fmt.Sprintf("%s/v%d", tc.name, version)
				if sendfile {
					name += "/sendfile"
				}
				t.Run(name, func(t *testing.T) {
					c, frames := fetchConn(t)
					resp := &FetchResponse{FetchResponse: kmsg.NewPtrFetchResponse(), Sendfile: sendfile}
					resp.SetVersion(version)
					tp := kmsg.NewFetchResponseTopic()
					tp.Topic = "t"
					tp.Partitions = make([]kmsg.FetchResponseTopicPartition, len(tc.regions))
					released := 0
					for i := range tc.regions {
						tp.Partitions[i] = kmsg.NewFetchResponseTopicPartition()
						tp.Partitions[i].Partition = int32(i)
						tp.Partitions[i].HighWatermark = int64(i) * 3
					}
					resp.Topics = append(resp.Topics, tp)
					for i, r := range tc.regions {
						resp.SetRecords(&resp.Topics[0].Partitions[i], FileRegion{File: f, Position: r.pos, Length: r.n, Release: func() { released++ }})
					}
					if err := resp.WriteFramed(c, 42, nil); err != nil {
						t.Fatal(err)
					}
					if released != len(tc.regions) {
						t.Errorf("released %d regions of %d", released, len(tc.regions))
					}
					frame := <-frames
					if got := int32(binary.BigEndian.Uint32(frame)); got != 42 {
						t.Fatalf("correlation id %d", got)
					}
					body := frame[4:]
					if version >= 12 {
						body = body[1:] // header tags
					}
					got := kmsg.NewPtrFetchResponse()
					got.SetVersion(version)
					if err := got.ReadFrom(body); err != nil {
						t.Fatal(err)
					}
					if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != len(tc.regions) {
						t.Fatalf("decoded %d topics", len(got.Topics))
					}
					for i, r := range tc.regions {
						p := got.Topics[0].Partitions[i]
						if p.Partition != int32(i) || p.HighWatermark != int64(i)*3 {
							t.Fatalf("partition %d: decoded %d, high watermark %d", i, p.Partition, p.HighWatermark)
						}
						if want := data[r.pos : r.pos+r.n]; !bytes.Equal(p.RecordBatches, want) {
							t.Fatalf("partition %d: %d bytes of records, want %d bytes at %d", i, len(p.RecordBatches), r.n, r.pos)
						}
					}
				})
			}
		}
	}
}

// TestWriteFramedBufferedMemory: the buffered path holds one buffer for a
// response however many partitions it has. It held a 1 MiB buffer for
// each, and its pool kept them: a response of 3,000 partitions of a few
// hundred bytes allocated 3 GB.
func TestWriteFramedBufferedMemory(t *testing.T) {
	f := segmentFile(t, make([]byte, 1000))
	c, frames := fetchConn(t)
	const partitions = 3000
	build := func() *FetchResponse {
		resp := &FetchResponse{FetchResponse: kmsg.NewPtrFetchResponse()}
		resp.SetVersion(12)
		tp := kmsg.NewFetchResponseTopic()
		tp.Topic = "t"
		tp.Partitions = make([]kmsg.FetchResponseTopicPartition, partitions)
		resp.Topics = append(resp.Topics, tp)
		for i := range tp.Partitions {
			resp.SetRecords(&resp.Topics[0].Partitions[i], FileRegion{File: f, Position: int64(i % 500), Length: 300})
		}
		return resp
	}
	write := func(resp *FetchResponse) {
		if err := resp.WriteFramed(c, 1, nil); err != nil {
			t.Fatal(err)
		}
		<-frames
	}
	resps := []*FetchResponse{build(), build()}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, resp := range resps {
		write(resp)
	}
	runtime.ReadMemStats(&after)
	// Each write's encoded head, pieces and the frame the reader
	// allocates are about 2 MB; the records (900 KB) fit one buffer.
	t.Logf("allocated %d KB", (after.TotalAlloc-before.TotalAlloc)>>10)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("writing %d partitions of 300 bytes allocated %d MB", partitions, alloc>>20)
	}
}
