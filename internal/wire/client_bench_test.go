package wire

import (
	"context"
	"encoding/binary"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkClientFetch is a follower's side of replication over loopback:
// Client requests a Fetch v12 and decodes a response of 8 partitions of
// 128 KiB of records each (1 MiB), as a replica fetcher does, with a new
// frame buffer per response (Request) and with the one the client keeps
// (RequestReusing). The server writes the same prepared frame each time
// (go test -bench ClientFetch -count 6 ./internal/wire).
func BenchmarkClientFetch(b *testing.B) {
	const partitions, records = 8, 128 << 10
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	t := kmsg.NewFetchResponseTopic()
	t.Topic = "bench"
	for i := range partitions {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = int32(i)
		p.RecordBatches = make([]byte, records)
		t.Partitions = append(t.Partitions, p)
	}
	resp.Topics = append(resp.Topics, t)
	// size, correlation id (patched per request), empty header tags, body
	frame := resp.AppendTo([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0})
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))

	for _, reuse := range []bool{false, true} {
		name := "Request"
		if reuse {
			name = "RequestReusing"
		}
		b.Run(name, func(b *testing.B) {
			addr, done := serveOne(b, func(c net.Conn) {
				out := append([]byte(nil), frame...)
				var in []byte
				var err error
				for {
					if in, err = ReadFrame(c, in, 1<<20); err != nil {
						return
					}
					copy(out[4:8], in[4:8]) // the request's correlation id
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			})
			cl := NewClient(addr, "bench", 2<<20)
			defer cl.Close()
			req := kmsg.NewPtrFetchRequest()
			req.SetVersion(12)
			ctx := context.Background()
			b.SetBytes(partitions * records)
			b.ReportAllocs()
			for b.Loop() {
				var r kmsg.Response
				var err error
				if reuse {
					r, err = cl.RequestReusing(ctx, req)
				} else {
					r, err = cl.Request(ctx, req)
				}
				if err != nil {
					b.Fatal(err)
				}
				if got := len(r.(*kmsg.FetchResponse).Topics[0].Partitions[7].RecordBatches); got != records {
					b.Fatalf("partition 7 has %d bytes of records, want %d", got, records)
				}
			}
			cl.Close()
			done()
		})
	}
}
