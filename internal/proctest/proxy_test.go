package proctest

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/samsahq/samsa/internal/testutil"
)

// serve accepts connections on a loopback port and runs handle on each
// (which closes it), until test cleanup.
func serve(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// echo serves connections on a loopback port by echoing them.
func echo(t *testing.T) string {
	t.Helper()
	return serve(t, func(c net.Conn) { io.Copy(c, c) })
}

func roundTrip(t *testing.T, c net.Conn, msg string, wait time.Duration) error {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		t.Fatalf("read %q, want %q", buf, msg)
	}
	return nil
}

// A cut proxy passes nothing, holds what was sent meanwhile, and delivers
// it in order once healed; connections opened during the cut reach the
// target after the heal.
func TestProxyCutHeal(t *testing.T) {
	p := NewProxy(t, echo(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(t, c, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if err := roundTrip(t, c, "during", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a cut proxy: %v", err)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := roundTrip(t, c2, "new", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection through a cut proxy: %v", err)
	}
	p.Heal()
	// The held "during" comes first, then what follows.
	buf := make([]byte, len("during"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "during" {
		t.Fatalf("after heal: %q, %v", buf, err)
	}
	if err := roundTrip(t, c, "after", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	buf = make([]byte, len("new"))
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c2, buf); err != nil || string(buf) != "new" {
		t.Fatalf("new connection after heal: %q, %v", buf, err)
	}
	p.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Fatal("connection open after Close")
	}
}

// kafkaEcho serves Kafka-framed requests on a loopback port: each is
// answered by a response frame carrying its correlation id and the rest of
// the request.
func kafkaEcho(t *testing.T) string {
	t.Helper()
	return serve(t, func(c net.Conn) {
		for {
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return
			}
			req := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(c, req); err != nil {
				return
			}
			// The response: size, correlation id, the request.
			resp := binary.BigEndian.AppendUint32(nil, uint32(4+len(req)))
			resp = append(resp, req[4:8]...)
			if _, err := c.Write(append(resp, req...)); err != nil {
				return
			}
		}
	})
}

// request is a Kafka request frame: header v1 (api key, version,
// correlation id, client.id) and a small body.
func request(key, version int16, corr int32, clientID string) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	b = append(b, "body"...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// call sends a request on c and waits up to wait for its response; it
// returns the response's correlation id.
func call(t *testing.T, c net.Conn, req []byte, wait time.Duration) (int32, error) {
	t.Helper()
	if _, err := c.Write(req); err != nil {
		return 0, err
	}
	c.SetReadDeadline(time.Now().Add(wait))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, err
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(resp)), nil
}

// CutFrom cuts the connections of one node (told by its client.id) and
// lets the others pass; healed, the held response arrives.
func TestProxyCutFrom(t *testing.T) {
	p := NewKafkaProxy(t, kafkaEcho(t))
	n2, n3, cl := testutil.Dial(t, p.Addr()), testutil.Dial(t, p.Addr()), testutil.Dial(t, p.Addr())
	for i, c := range []net.Conn{n2, n3, cl} {
		id := []string{"samsa-replica-2", "samsa-broker-3", "kgo"}[i]
		if corr, err := call(t, c, request(1, 12, 1, id), 5*time.Second); err != nil || corr != 1 {
			t.Fatalf("%s before the cut: %d, %v", id, corr, err)
		}
	}
	p.CutFrom(2, true)
	if _, err := call(t, n2, request(1, 12, 2, "samsa-replica-2"), 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("node 2 through its cut: %v", err)
	}
	for _, c := range []net.Conn{n3, cl} {
		if corr, err := call(t, c, request(1, 12, 2, "x"), 5*time.Second); err != nil || corr != 2 {
			t.Fatalf("other connection during node 2's cut: %d, %v", corr, err)
		}
	}
	// A new connection of node 2 is cut too.
	n2b := testutil.Dial(t, p.Addr())
	if _, err := call(t, n2b, request(3, 12, 7, "samsa-broker-2"), 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection of node 2 through its cut: %v", err)
	}
	p.CutFrom(2, false)
	for _, c := range []net.Conn{n2, n2b} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatalf("held response after heal: %v", err)
		}
	}
}

// A slow link delivers no frame before its latency (each way) and no
// faster than its byte rate.
func TestProxySlow(t *testing.T) {
	p := NewKafkaProxy(t, kafkaEcho(t))
	c := testutil.Dial(t, p.Addr())
	p.SetSlow(Slowness{Latency: 150 * time.Millisecond, Jitter: 50 * time.Millisecond})
	start := time.Now()
	if _, err := call(t, c, request(1, 12, 1, "kgo"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("round trip over a link of 150 ms each way took %v", d)
	}
	p.SetSlow(Slowness{BytesPerSecond: 256 << 10})
	big := request(1, 12, 2, "kgo")
	big = append(big, make([]byte, 64<<10)...)
	binary.BigEndian.PutUint32(big, uint32(len(big)-4))
	start = time.Now()
	if _, err := call(t, c, big, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// 64 KiB each way at 256 KiB/s.
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("128 KiB over a link of 256 KiB/s took %v", d)
	}
	p.Reset()
	if _, err := call(t, c, request(1, 12, 3, "kgo"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A flaky link closes connections instead of forwarding.
func TestProxyFlaky(t *testing.T) {
	for _, kafka := range []bool{false, true} {
		var p *Proxy
		var c net.Conn
		if kafka {
			p = NewKafkaProxy(t, kafkaEcho(t))
			c = testutil.Dial(t, p.Addr())
			if _, err := call(t, c, request(1, 12, 1, "kgo"), 5*time.Second); err != nil {
				t.Fatal(err)
			}
		} else {
			p = NewProxy(t, echo(t))
			c = testutil.Dial(t, p.Addr())
		}
		p.SetFlaky(1)
		var err error
		if kafka {
			_, err = call(t, c, request(1, 12, 2, "kgo"), 5*time.Second)
		} else {
			err = roundTrip(t, c, "x", 5*time.Second)
		}
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("kafka %v: through a link closing every connection: %v", kafka, err)
		}
	}
}

// A response fault drops (closes the connection) or delays the responses
// of the API it picks, and only those.
func TestProxyResponseFault(t *testing.T) {
	p := NewKafkaProxy(t, kafkaEcho(t))
	p.SetResponseFault(func(key, version int16) ResponseFault {
		switch {
		case key == 26 && version == 5:
			return ResponseFault{Drop: true}
		case key == 26:
			return ResponseFault{Delay: 300 * time.Millisecond}
		}
		return ResponseFault{}
	})
	c := testutil.Dial(t, p.Addr())
	if corr, err := call(t, c, request(0, 11, 1, "kgo"), 5*time.Second); err != nil || corr != 1 {
		t.Fatalf("produce: %d, %v", corr, err)
	}
	start := time.Now()
	if corr, err := call(t, c, request(26, 4, 2, "kgo"), 5*time.Second); err != nil || corr != 2 {
		t.Fatalf("EndTxn v4: %d, %v", corr, err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("EndTxn v4 delayed 300 ms came after %v", d)
	}
	if _, err := call(t, c, request(26, 5, 3, "kgo"), 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("EndTxn v5 whose response is dropped: %v", err)
	}
}
