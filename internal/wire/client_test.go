package wire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// TestClientRedialsClosedIdleConnection: a broker closes an idle
// connection (connections.max.idle.ms); the next request of this node's
// Client goes out on a new connection instead of failing on the old one.
func TestClientRedialsClosedIdleConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	v := NewVersions()
	v.Add(kmsg.ApiVersions, 0, 3)
	served := make(chan struct{}, 4)
	go func() {
		// Each connection gets one answer, then the server closes it.
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			frame, err := ReadFrame(c, nil, 1<<20)
			if err == nil {
				var req *Request
				if req, err = ParseRequest(frame, v); err == nil {
					_, err = c.Write(AppendResponse(nil, req.CorrelationID, kmsg.NewPtrApiVersionsResponse()))
				}
			}
			c.Close()
			if err != nil {
				t.Errorf("server: %v", err)
				return
			}
			served <- struct{}{}
		}
	}()
	cl := NewClient(ln.Addr().String(), "test", 1<<20)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := cl.Request(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		<-served
		// The server's close reaches this side as after an idle
		// timeout: the old connection reads as closed.
		cl.mu.Lock()
		waitReadable(t, cl.conn)
		closed := closedByPeer(cl.conn, cl.rd)
		cl.mu.Unlock()
		if !closed {
			t.Fatal("the server's close does not read as closed")
		}
	}
}

// TestClosedByPeerOpenConnection: an open idle connection is not taken
// for closed.
func TestClosedByPeerOpenConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-accepted
	defer s.Close()
	rd := bufio.NewReader(c)
	if closedByPeer(c, rd) {
		t.Fatal("an open connection read as closed")
	}
	s.Close()
	waitReadable(t, c)
	if !closedByPeer(c, rd) {
		t.Fatal("a closed connection does not read as closed")
	}
}

// waitReadable waits, without reading, until c has something to read
// (bytes, or the peer's close), for at most 5 seconds.
func waitReadable(t *testing.T, c net.Conn) {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	if err := raw.Read(func(fd uintptr) bool {
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return !errors.Is(err, unix.EAGAIN) // false: wait for readiness
	}); err != nil {
		t.Fatalf("waiting for the connection to be readable: %v", err)
	}
}

// TestRequestReusing: responses read into the client's kept buffer decode
// whole, whether larger or smaller than the one before, and a response
// of Request does not share that buffer (it stays as it was after later
// RequestReusing calls).
func TestRequestReusing(t *testing.T) {
	v := NewVersions()
	v.Add(kmsg.Fetch, 12, 12)
	sizes := []int{300_000, 10, 70_000, 500_000}
	addr, done := serveOne(t, func(c net.Conn) {
		for i := 0; ; i++ {
			frame, err := ReadFrame(c, nil, 1<<20)
			if err != nil {
				return
			}
			req, err := ParseRequest(frame, v)
			if err != nil {
				t.Errorf("server: %v", err)
				return
			}
			resp := req.Body.ResponseKind().(*kmsg.FetchResponse)
			resp.SetVersion(12)
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = "t"
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.RecordBatches = bytes.Repeat([]byte{byte(i + 1)}, sizes[i%len(sizes)])
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			if _, err := c.Write(AppendResponse(nil, req.CorrelationID, resp)); err != nil {
				return
			}
		}
	})
	defer done()
	cl := NewClient(addr, "test", 1<<20)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	records := func(r kmsg.Response) []byte { return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches }
	kept, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 2*len(sizes); i++ {
		r, err := cl.RequestReusing(ctx, req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if want := bytes.Repeat([]byte{byte(i + 1)}, sizes[i%len(sizes)]); !bytes.Equal(records(r), want) {
			t.Fatalf("request %d: %d bytes of records, want %d bytes of %d", i, len(records(r)), len(want), i+1)
		}
	}
	if want := bytes.Repeat([]byte{1}, sizes[0]); !bytes.Equal(records(kept), want) {
		t.Fatal("the response of Request changed after RequestReusing calls")
	}
}
