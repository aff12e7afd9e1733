package quorum

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"testing/iotest"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
)

func testMessage(t testing.TB) *raftpb.Message {
	data, err := encodeEntry([]metadata.Record{seqRecord(7)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &raftpb.Message{
		Type:    raftpb.MsgApp.Enum(),
		From:    new(raftID(2)),
		To:      new(raftID(3)),
		Term:    new(uint64(4)),
		Index:   new(uint64(9)),
		Commit:  new(uint64(8)),
		Entries: []*raftpb.Entry{{Term: new(uint64(4)), Index: new(uint64(10)), Data: data}, {Term: new(uint64(4)), Index: new(uint64(11))}},
	}
}

func TestFrames(t *testing.T) {
	m := testMessage(t)
	hb := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(2)), To: new(uint64(3))}
	var stream []byte
	var err error
	for _, x := range []*raftpb.Message{m, hb, m} {
		if stream, err = appendFrame(stream, x); err != nil {
			t.Fatal(err)
		}
	}
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
	} {
		r := wrap(bytes.NewReader(stream))
		for i, want := range []*raftpb.Message{m, hb, m} {
			got, err := readFrame(r)
			if err != nil {
				t.Fatalf("%s: frame %d: %v", name, i, err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("%s: frame %d: %v, want %v", name, i, got, want)
			}
		}
		if _, err := readFrame(r); err != io.EOF {
			t.Fatalf("%s: after the last frame: %v", name, err)
		}
	}
	one, _ := appendFrame(nil, m)
	big := binary.BigEndian.AppendUint32(nil, MaxFrameBytes+1)
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"zero length":   {[]byte{0, 0, 0, 0}, ErrFrame},
		"too long":      {big, ErrFrame},
		"short length":  {[]byte{0, 0}, io.ErrUnexpectedEOF},
		"short message": {one[:len(one)-1], io.ErrUnexpectedEOF},
		"not protobuf":  {append(binary.BigEndian.AppendUint32(nil, 2), 0xff, 0xff), ErrFrame},
	} {
		if _, err := readFrame(bytes.NewReader(tc.b)); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

func TestHandshake(t *testing.T) {
	b := appendHandshake(nil, 0, 7)
	if from, to, err := parseHandshake(b); from != 0 || to != 7 || err != nil {
		t.Fatalf("%d %d %v", from, to, err)
	}
	bad := append([]byte(nil), b...)
	bad[4] = 9
	for _, x := range [][]byte{b[:5], bad, append([]byte("GET /"), b[5:]...)} {
		if _, _, err := parseHandshake(x); !errors.Is(err, ErrHandshake) {
			t.Fatalf("%q: %v", x, err)
		}
	}
	// A Kafka request frame never starts with the preamble: its size would
	// be above socket.request.max.bytes.
	if size := binary.BigEndian.Uint32(Preamble[:]); size < 1<<30 {
		t.Fatalf("preamble as a request size: %d", size)
	}
}

// TestTCPTransportRefuses checks that a transport closes connections
// with a wrong handshake or messages not from the handshake's voter, and
// passes on good ones, read-index requests other voters forward too.
func TestTCPTransportRefuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	voters := []config.Voter{{ID: 1, Host: "127.0.0.1", Port: 1}, {ID: 2, Host: "127.0.0.1", Port: 1}, {ID: 3, Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}}
	tr, err := NewTCPTransport(TCPConfig{NodeID: 3, Voters: voters, Listener: ln, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *raftpb.Message, 10)
	if err := tr.Start(func(m *raftpb.Message) { got <- m }, func(int32) {}); err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	// dialSend opens a connection, writes b and reports whether the
	// transport then closed it.
	dialSend := func(b []byte) (closed bool) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err = c.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout()) // EOF, or a reset when unread bytes were left
	}
	m := testMessage(t)
	frame, _ := appendFrame(nil, m)
	// read is a read-index request of voter from (raft's MsgReadIndex, the
	// context as an entry), as voter 1 forwards it to voter 3.
	read := func(from uint64) []byte {
		b, _ := appendFrame(nil, &raftpb.Message{Type: raftpb.MsgReadIndex.Enum(), From: new(from), To: new(raftID(3)), Entries: []*raftpb.Entry{{Data: catchUpCtx}}})
		return b
	}
	for name, b := range map[string][]byte{
		"to another voter":           append(appendHandshake(nil, 2, 1), frame...),
		"from a non-voter":           append(appendHandshake(nil, 9, 3), frame...),
		"from itself":                append(appendHandshake(nil, 3, 3), frame...),
		"message from 1":             append(appendHandshake(nil, 1, 3), frame...),
		"read index of a non-voter":  append(appendHandshake(nil, 1, 3), read(raftID(9))...),
		"read index of the receiver": append(appendHandshake(nil, 1, 3), read(raftID(3))...),
		"read index of a wrapped id": append(appendHandshake(nil, 1, 3), read(raftID(2)+1<<32)...),
		"kafka request":              {0, 0, 0, 10, 0, 18, 0, 3, 0, 0, 0, 1, 0, 0},
		"oversized frame":            binary.BigEndian.AppendUint32(appendHandshake(nil, 2, 3), MaxFrameBytes+1),
	} {
		if !dialSend(b) {
			t.Errorf("%s: connection left open", name)
		}
	}
	select {
	case m := <-got:
		t.Fatalf("a refused connection delivered %v", m)
	default:
	}
	if dialSend(append(appendHandshake(nil, 2, 3), frame...)) {
		t.Fatalf("a good connection was closed")
	}
	if r := <-got; !proto.Equal(r, m) {
		t.Fatalf("delivered %v", r)
	}
	// Voter 2 took voter 1 for the leader
	// and asked it for a read index; voter 1, a follower of voter 3 by
	// then, forwards the request with voter 2's id as raft does. The
	// connection stays open and the request reaches raft.
	fwd := read(raftID(2))
	if dialSend(append(appendHandshake(nil, 1, 3), fwd...)) {
		t.Fatal("the connection forwarding a read-index request was closed")
	}
	if r := <-got; r.GetType() != raftpb.MsgReadIndex || r.GetFrom() != raftID(2) {
		t.Fatalf("delivered %v", r)
	}
}

func FuzzReadFrame(f *testing.F) {
	one, _ := appendFrame(nil, testMessage(f))
	hb, _ := appendFrame(nil, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Commit: new(uint64(5))})
	f.Add(one)
	f.Add(append(hb, one...))
	f.Add([]byte{0, 0, 0, 1, 8})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			m, err := readFrame(r)
			if err != nil {
				return
			}
			again, err := appendFrame(nil, m)
			if err != nil {
				t.Fatal(err)
			}
			back, err := readFrame(bytes.NewReader(again))
			if err != nil || !proto.Equal(back, m) {
				t.Fatalf("%v re-read as %v, %v", m, back, err)
			}
		}
	})
}

func FuzzParseHandshake(f *testing.F) {
	f.Add(appendHandshake(nil, 1, 2))
	f.Add([]byte("SRFT\x01\x00\x00\x00\x01\x00\x00\x00\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		from, to, err := parseHandshake(b)
		if err != nil {
			return
		}
		if !bytes.Equal(appendHandshake(nil, from, to), b) {
			t.Fatalf("%q parsed as %d %d", b, from, to)
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	one, _ := encodeEntry([]metadata.Record{seqRecord(1)}, 0)
	many, _ := encodeEntry([]metadata.Record{seqRecord(1), metadata.TopicRecord{Name: "t"}}, 0)
	local, _ := encodeBatch([]metadata.Record{seqRecord(1), seqRecord(2)}, 0)
	lc, _ := leaderChangeBatch(0, 1, 1, []int32{1}, 0)
	for _, b := range [][]byte{one, many, local, lc} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := decodeBatch(b)
		if _, cerr := checkEntryData(b); err != nil || cerr != nil || len(b) == 0 {
			return
		}
		again, err := encodeEntry(recs, 0)
		if len(recs) == 0 || err != nil {
			return
		}
		if back, err := decodeBatch(again); err != nil || len(back) != len(recs) {
			t.Fatalf("%v re-decoded as %v, %v", recs, back, err)
		}
	})
}
