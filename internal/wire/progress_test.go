package wire

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// oneRegion is a Fetch response whose one partition holds region.
func oneRegion(sendfile bool, region FileRegion) *FetchResponse {
	resp := &FetchResponse{FetchResponse: kmsg.NewPtrFetchResponse(), Sendfile: sendfile}
	resp.SetVersion(12)
	tp := kmsg.NewFetchResponseTopic()
	tp.Topic = "t"
	tp.Partitions = []kmsg.FetchResponseTopicPartition{kmsg.NewFetchResponseTopicPartition()}
	resp.Topics = append(resp.Topics, tp)
	resp.SetRecords(&resp.Topics[0].Partitions[0], region)
	return resp
}

// TestWriteFramedProgress: a write that reaches the connection's deadline
// after the peer took some bytes calls progress and goes on, on both
// paths, so that a deadline pushed back there bounds a stall rather than
// the whole response; without progress it fails at the deadline.
func TestWriteFramedProgress(t *testing.T) {
	f := segmentFile(t, make([]byte, 64<<10))
	const deadline = time.Minute
	for _, sendfile := range []bool{false, true} {
		for _, extend := range []bool{true, false} {
			name := map[bool]string{false: "buffered", true: "sendfile"}[sendfile]
			if !extend {
				name += "/no progress"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c, peer := net.Pipe()
					defer c.Close()
					// 4 KiB every 40 seconds: 11 minutes for the response.
					read := make(chan int)
					go func() {
						n := 0
						buf := make([]byte, 4<<10)
						for {
							time.Sleep(40 * time.Second)
							m, err := peer.Read(buf)
							n += m
							if err != nil {
								read <- n
								return
							}
						}
					}()
					c.SetWriteDeadline(time.Now().Add(deadline))
					calls := 0
					var progress func()
					if extend {
						progress = func() {
							calls++
							c.SetWriteDeadline(time.Now().Add(deadline))
						}
					}
					start := time.Now()
					err := oneRegion(sendfile, FileRegion{File: f, Length: 64 << 10}).WriteFramed(c, 1, progress)
					took := time.Since(start)
					c.Close()
					n := <-read
					if !extend {
						if !errors.Is(err, os.ErrDeadlineExceeded) || took != deadline {
							t.Fatalf("without progress: %v after %v, want a deadline error after %v", err, took, deadline)
						}
						return
					}
					if err != nil {
						t.Fatalf("after %v: %v", took, err)
					}
					if n < 64<<10 || took < 10*deadline || calls < 10 {
						t.Fatalf("wrote %d bytes in %v with %d calls of progress", n, took, calls)
					}
				})
			})
		}
	}
}

// TestWriteFramedSendfileProgress: over TCP, sendfile(2) that reaches the
// socket's deadline after copying some bytes calls progress and goes on.
func TestWriteFramedSendfileProgress(t *testing.T) {
	const size = 16 << 20
	f := segmentFile(t, make([]byte, size))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	read := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			read <- err
			return
		}
		defer c.Close()
		// 512 KiB every 40 ms: about 1.3 s for the response, past
		// what the socket buffers hold.
		buf := make([]byte, 512<<10)
		var n int
		for n < size {
			time.Sleep(40 * time.Millisecond) // the pace of a slow reader on a real socket, not a wait for a condition
			m, err := io.ReadFull(c, buf)
			n += m
			if err != nil {
				read <- err
				return
			}
		}
		read <- nil
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const deadline = 500 * time.Millisecond
	c.SetWriteDeadline(time.Now().Add(deadline))
	progress := func() { c.SetWriteDeadline(time.Now().Add(deadline)) }
	start := time.Now()
	if err := oneRegion(true, FileRegion{File: f, Length: size}).WriteFramed(c, 1, progress); err != nil {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	// One sendfile(2) call of the region outlived the deadline.
	if took := time.Since(start); took < deadline {
		t.Errorf("written in %v, before the %v deadline", took, deadline)
	}
	c.Close()
	if err := <-read; err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal(err)
	}
}

// TestWriteFramedShortFile: a region past the end of its file fails the
// write on both paths. sendfile(2)'s error was overwritten by the socket's
// (none), and the response went out short of its frame size.
func TestWriteFramedShortFile(t *testing.T) {
	f := segmentFile(t, make([]byte, 1000))
	for _, sendfile := range []bool{false, true} {
		c, frames := fetchConn(t)
		err := oneRegion(sendfile, FileRegion{File: f, Position: 500, Length: 1000}).WriteFramed(c, 1, nil)
		if err == nil {
			t.Errorf("sendfile %v: wrote a region 500 bytes past the end of its file", sendfile)
		}
		c.Close()
		for range frames {
		}
	}
}
