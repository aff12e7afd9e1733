package broker

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTrip encodes m (a request or response body) and decodes it into a
// new message of the same key and version.
func roundTrip[M interface {
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
	SetVersion(int16)
}](t *testing.T, m M, fresh M, version int16) M {
	t.Helper()
	fresh.SetVersion(version)
	if err := fresh.ReadFrom(m.AppendTo(nil)); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return fresh
}

// Every forwarded API at every version served: a forwarding broker asks
// for the commit offset in flexible requests only and leaves the request
// as it was once sent; the controller listener answers it only to a
// request that asked, in the response's tagged fields, which the
// forwarding broker takes out again before its client sees the answer.
func TestCommitOffsetTag(t *testing.T) {
	b := &Broker{logger: slog.New(slog.DiscardHandler)}
	const off = 1234567
	for key := range forwarded {
		a := apis[key]
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(int16(key))
			req.SetVersion(v)
			plain := req.AppendTo(nil)
			undo := askCommitOffset(req)
			asked := roundTrip[kmsg.Request](t, req, kmsg.RequestForKey(int16(key)), v)
			undo()
			if got := req.AppendTo(nil); !bytes.Equal(got, plain) {
				t.Errorf("%s v%d: request changed once forwarded", kmsg.NameForKey(int16(key)), v)
			}
			resp := req.ResponseKind()
			resp.SetVersion(v)
			replyCommitOffset(asked, resp, off)
			got := roundTrip[kmsg.Response](t, resp, req.ResponseKind(), v)
			o, ok := b.takeCommitOffset(got)
			if ok != req.IsFlexible() || ok && o != off {
				t.Errorf("%s v%d (flexible %v): commit offset %d %v", kmsg.NameForKey(int16(key)), v, req.IsFlexible(), o, ok)
			}
			clean := req.ResponseKind()
			clean.SetVersion(v)
			if !bytes.Equal(got.AppendTo(nil), clean.AppendTo(nil)) {
				t.Errorf("%s v%d: the answer still carries the tag", kmsg.NameForKey(int16(key)), v)
			}

			// A request that did not ask (a client of the controller
			// listener) gets no tag.
			resp = req.ResponseKind()
			resp.SetVersion(v)
			replyCommitOffset(roundTrip[kmsg.Request](t, req, kmsg.RequestForKey(int16(key)), v), resp, off)
			if !bytes.Equal(resp.AppendTo(nil), clean.AppendTo(nil)) {
				t.Errorf("%s v%d: answered a request that did not ask", kmsg.NameForKey(int16(key)), v)
			}
		}
	}
}

// FuzzCommitOffset feeds arbitrary values of the commit offset tag
// through a response's encoding to the forwarding broker's decoder: it
// takes 8 bytes of an offset of -1 or more, rejects the rest, and never
// panics.
func FuzzCommitOffset(f *testing.F) {
	for _, seed := range [][]byte{appendCommitOffset(nil, 0), appendCommitOffset(nil, -1), appendCommitOffset(nil, 1<<40), appendCommitOffset(nil, -2), {}, {1, 2, 3}, make([]byte, 9)} {
		f.Add(seed)
	}
	b := &Broker{logger: slog.New(slog.DiscardHandler)}
	f.Fuzz(func(t *testing.T, val []byte) {
		resp := kmsg.NewPtrCreateACLsResponse()
		resp.SetVersion(3)
		resp.UnknownTags.Set(commitOffsetTag, val)
		got := kmsg.NewPtrCreateACLsResponse()
		got.SetVersion(3)
		if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		off, ok := b.takeCommitOffset(got)
		want := len(val) == 8 && int64(binary.BigEndian.Uint64(val)) >= -1
		if ok != want {
			t.Fatalf("%x: ok %v, want %v", val, ok, want)
		}
		if ok && !slices.Equal(appendCommitOffset(nil, off), val) {
			t.Fatalf("%x: decoded %d", val, off)
		}
		if got.UnknownTags.Len() != 0 {
			t.Fatalf("%x: tag left in the answer", val)
		}
	})
}
