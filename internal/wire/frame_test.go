package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func testVersions() *Versions {
	v := NewVersions()
	v.Add(kmsg.ApiVersions, 0, 3)
	v.Add(kmsg.Metadata, 0, 12)
	v.Add(kmsg.Produce, 3, 11)
	return v
}

// requestFrame encodes req as a client would, size prefix included.
func requestFrame(req kmsg.Request, correlationID int32) []byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test-client"))
	return f.AppendRequest(nil, req, correlationID)
}

// shortReaders give a frame whole, one byte a read, or half of each read.
var shortReaders = []struct {
	name string
	r    func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"one byte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
}

func TestReadFrameAndParse(t *testing.T) {
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("a")}}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
	old := kmsg.NewPtrMetadataRequest()
	old.SetVersion(1)
	for _, tc := range []struct {
		name string
		req  kmsg.Request
	}{
		{"metadata v12 flexible", meta},
		{"apiversions v3", av},
		{"metadata v1", old},
	} {
		frame := requestFrame(tc.req, 42)
		for _, rd := range shortReaders {
			t.Run(tc.name+"/"+rd.name, func(t *testing.T) {
				body, err := ReadFrame(rd.r(bytes.NewReader(frame)), nil, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				req, err := ParseRequest(body, testVersions())
				if err != nil {
					t.Fatal(err)
				}
				if req.CorrelationID != 42 || req.Key != tc.req.Key() || req.Version != tc.req.GetVersion() || req.Body == nil {
					t.Fatalf("parsed %+v", req.Header)
				}
				if req.ClientID == nil || *req.ClientID != "test-client" {
					t.Fatalf("client id %v", req.ClientID)
				}
				if !bytes.Equal(req.Body.AppendTo(nil), tc.req.AppendTo(nil)) {
					t.Fatal("body does not round trip")
				}
			})
		}
	}
}

func TestReadFrameLimits(t *testing.T) {
	big := binary.BigEndian.AppendUint32(nil, 1<<30)
	if _, err := ReadFrame(bytes.NewReader(big), nil, 1<<20); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	neg := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	if _, err := ReadFrame(bytes.NewReader(neg), nil, 1<<20); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("negative: %v", err)
	}
	short := append(binary.BigEndian.AppendUint32(nil, 100), 1, 2, 3)
	if _, err := ReadFrame(bytes.NewReader(short), nil, 1<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
	tiny := append(binary.BigEndian.AppendUint32(nil, 2), 1, 2)
	if _, err := ReadFrame(bytes.NewReader(tiny), nil, 1<<20); !errors.Is(err, ErrMalformed) {
		t.Fatalf("tiny: %v", err)
	}
}

// TestReadFrameGrows: frames larger than the buffer given, read whole or in
// short reads, come back intact; a buffer large enough is used as it is.
func TestReadFrameGrows(t *testing.T) {
	body := make([]byte, 5*firstFrameChunk+123)
	for i := range body {
		body[i] = byte(i*13 + i>>9)
	}
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	for _, rd := range shortReaders {
		for _, given := range []int{0, 10, firstFrameChunk + 1, len(body)} {
			t.Run(fmt.Sprintf("%s/cap %d", rd.name, given), func(t *testing.T) {
				buf := make([]byte, 3, given+3)[3:]
				got, err := ReadFrame(rd.r(bytes.NewReader(frame)), buf, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, body) {
					t.Fatalf("read %d bytes, not the %d sent", len(got), len(body))
				}
				if given >= len(body) && &got[0] != &buf[:1][0] {
					t.Error("a large enough buffer was not used")
				}
			})
		}
	}
}

// TestReadFrameAnnouncedNotSent: a frame that announces 100 MB and sends
// 1,000 bytes costs about 64 KiB, not 100 MB.
func TestReadFrameAnnouncedNotSent(t *testing.T) {
	frame := append(binary.BigEndian.AppendUint32(nil, 100<<20), make([]byte, 1000)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := ReadFrame(bytes.NewReader(frame), nil, 100<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("truncated: %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("10 frames announcing 100 MB and sending 1,000 bytes allocated %d MB", alloc>>20)
	}
}

func TestParseUnsupported(t *testing.T) {
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(2)
	body, _ := ReadFrame(bytes.NewReader(requestFrame(p, 1)), nil, 1<<20)
	req, err := ParseRequest(body, testVersions())
	if err != nil || req.Body != nil {
		t.Fatalf("unsupported version: %v %v", err, req.Body)
	}
	// A supported version with a truncated body is malformed.
	m := kmsg.NewPtrMetadataRequest()
	m.SetVersion(12)
	m.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("abc")}}
	body, _ = ReadFrame(bytes.NewReader(requestFrame(m, 1)), nil, 1<<20)
	if _, err := ParseRequest(body[:len(body)-3], testVersions()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated body: %v", err)
	}
}

func TestAppendResponse(t *testing.T) {
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	frame := AppendResponse(nil, 7, resp)
	size := binary.BigEndian.Uint32(frame)
	if int(size) != len(frame)-4 || binary.BigEndian.Uint32(frame[4:]) != 7 || frame[8] != 0 {
		t.Fatalf("frame % x", frame[:12])
	}
	got := kmsg.NewPtrMetadataResponse()
	got.SetVersion(12)
	if err := got.ReadFrom(frame[9:]); err != nil {
		t.Fatal(err)
	}
	// ApiVersions responses never carry header tags.
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(3)
	frame = AppendResponse(nil, 7, av)
	got2 := kmsg.NewPtrApiVersionsResponse()
	got2.SetVersion(3)
	if err := got2.ReadFrom(frame[8:]); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseRequest feeds arbitrary frames to the request decoder: it may
// reject them but must never panic.
func FuzzParseRequest(f *testing.F) {
	for _, r := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrProduceRequest()} {
		r.SetVersion(r.MaxVersion())
		f.Add(requestFrame(r, 1)[4:])
	}
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte{1, 2, 3}}}}}
	f.Add(requestFrame(p, 1)[4:])
	v := testVersions()
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := ParseRequest(frame, v)
		if err == nil && req.Body != nil {
			req.Body.AppendTo(nil)
		}
		framed := append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
		ReadFrame(bytes.NewReader(framed), nil, 1<<16)
	})
}
