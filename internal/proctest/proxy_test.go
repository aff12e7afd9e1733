package proctest

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echo serves connections on a loopback port by echoing them.
func echo(t *testing.T) string {
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
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
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
