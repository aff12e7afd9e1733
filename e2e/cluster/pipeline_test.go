package cluster

import (
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/testutil"
	"github.com/samsahq/samsa/internal/wire"
)

// TestProducePipelined: a Produce that follows an acks=all Produce on the
// same connection is appended while the first waits for its followers,
// and the two responses come back in request order. The followers'
// fetches are cut (they reach the leader through a proxy), so the acks=all
// request waits until its 5 s timeout (the ISR does not shrink within
// replica.lag.time.max.ms=60000); the acks=1 request sent after it must
// be in the leader's log within 4 s. Before server.Deferred it was
// appended only once the first was answered. An ApiVersions sent third is
// answered third.
func TestProducePipelined(t *testing.T) {
	conn, addr := cutLeaderConn(t, "pipe")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(acks int16, timeout int32) kmsg.Request { return produceV8(t, "pipe", acks, timeout, "v") }
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("pipelined"))
	// Then an ApiVersions, which must wait for both: only Produce
	// requests are handled while responses are pending.
	reqs := []kmsg.Request{produce(-1, 5000), produce(1, 5000), kmsg.NewPtrApiVersionsRequest()}
	var out []byte
	for i, r := range reqs {
		// AppendRequest writes the size at the start of its dst.
		out = append(out, f.AppendRequest(nil, r, int32(i+1))...)
	}
	sent := time.Now()
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}

	// The leader's log end offset (ListOffsets latest with replica id
	// -2 reads to the log end, not the high-watermark).
	lc := wire.NewClient(addr, "pipelined-check", 1<<20)
	defer lc.Close()
	logEnd := func() int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(7)
		req.ReplicaID = -2
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "pipe"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := lc.Request(ctx, req)
		if err != nil {
			t.Logf("ListOffsets: %v", err)
			return -1
		}
		p := r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Logf("ListOffsets: %v", kerr.ErrorForCode(p.ErrorCode))
			return -1
		}
		return p.Offset
	}
	testutil.WaitFor(t, 4*time.Second, "the second produce appended while the first waits for acks=all", func() bool { return logEnd() >= 2 })
	if waited := time.Since(sent); waited >= 5*time.Second {
		t.Fatalf("second produce appended after %v, past the first's timeout", waited)
	}

	want := []struct {
		code int16
		base int64
	}{{kerr.RequestTimedOut.Code, 0}, {0, 1}}
	for i, w := range want {
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		body, err := wire.ReadFrame(conn, nil, 1<<20)
		if err != nil {
			t.Fatalf("response %d: %v", i+1, err)
		}
		if corr := int32(binary.BigEndian.Uint32(body)); corr != int32(i+1) {
			t.Fatalf("response %d has correlation id %d: out of order", i+1, corr)
		}
		checkProduceV8(t, body, w.code, w.base)
	}
	body, err := wire.ReadFrame(conn, nil, 1<<20)
	if err != nil {
		t.Fatalf("ApiVersions response: %v", err)
	}
	if corr := binary.BigEndian.Uint32(body); corr != 3 {
		t.Fatalf("third response has correlation id %d", corr)
	}
}

// TestProducePipelinedMixed: on one connection to a leader whose
// followers are cut, Produce acks=all, acks=0, acks=1, acks=all, then a
// Metadata and a last acks=1 Produce. The acks=0 request has no response
// and does not disturb the order: the responses carry correlation ids 1,
// 3, 4, 5, 6 in that order, the acks=all ones REQUEST_TIMED_OUT at their
// offsets, the acks=1 ones at theirs (the log holds the records in send
// order: 0, 1, 2, 3, 4), and the Metadata is answered only after the
// produces before it; nothing else comes back.
func TestProducePipelinedMixed(t *testing.T) {
	conn, _ := cutLeaderConn(t, "pipemix")
	produce := func(acks int16, value string) kmsg.Request { return produceV8(t, "pipemix", acks, 2000, value) }
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(8)
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("pipemix")
	meta.Topics = append(meta.Topics, mt)
	reqs := []kmsg.Request{produce(-1, "0"), produce(0, "1"), produce(1, "2"), produce(-1, "3"), meta, produce(1, "4")}
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("pipelined-mixed"))
	var out []byte
	for i, r := range reqs {
		out = append(out, f.AppendRequest(nil, r, int32(i+1))...)
	}
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}

	want := []struct {
		corr int32
		code int16
		base int64
	}{{1, kerr.RequestTimedOut.Code, 0}, {3, 0, 2}, {4, kerr.RequestTimedOut.Code, 3}, {5, 0, 0}, {6, 0, 4}}
	for _, w := range want {
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		body, err := wire.ReadFrame(conn, nil, 1<<20)
		if err != nil {
			t.Fatalf("response with correlation id %d: %v", w.corr, err)
		}
		if corr := int32(binary.BigEndian.Uint32(body)); corr != w.corr {
			t.Fatalf("got correlation id %d, want %d", corr, w.corr)
		}
		if w.corr == 5 {
			resp := kmsg.NewPtrMetadataResponse()
			resp.SetVersion(8)
			if err := resp.ReadFrom(body[4:]); err != nil {
				t.Fatal(err)
			}
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
				t.Errorf("metadata response: %+v", resp.Topics)
			}
			continue
		}
		checkProduceV8(t, body, w.code, w.base)
	}
	// Nothing more: the acks=0 request has no response.
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if body, err := wire.ReadFrame(conn, nil, 1<<20); err == nil {
		t.Fatalf("unexpected extra response with correlation id %d", binary.BigEndian.Uint32(body))
	}
}

// cutLeaderConn creates topic (one partition) on a proxied three-node
// cluster with replica.lag.time.max.ms=60000, cuts its leader's followers
// off (their fetches go through the proxy), and returns a connection to
// the leader and its address; the cluster, cut and connection end with
// the test.
func cutLeaderConn(t *testing.T, topic string) (net.Conn, string) {
	t.Helper()
	c := startCluster(t, true, "replica.lag.time.max.ms=60000")
	cl := newClient(t, c)
	createTopic(t, c, cl, topic, 1, nil)
	leader := mustView(t, c, topic, c.Brokers()...).parts[0].leader
	n := c.Node(leader)
	addr := "127.0.0.1:" + strconv.Itoa(n.BrokerPort)
	n.BrokerProxy.Cut()
	t.Cleanup(n.BrokerProxy.Heal)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, addr
}

// produceV8 is a Produce v8 (no flexible header: the responses are read
// by hand) of one record of value to partition 0 of topic.
func produceV8(t *testing.T, topic string, acks int16, timeoutMs int32, value string) kmsg.Request {
	t.Helper()
	b, err := record.Build(record.Spec{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.Record{{Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(8)
	req.Acks, req.TimeoutMillis = acks, timeoutMs
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// checkProduceV8 decodes body, a Produce v8 response after its
// correlation id, and fails the test unless its one partition has code at
// base offset base.
func checkProduceV8(t *testing.T, body []byte, code int16, base int64) {
	t.Helper()
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(8)
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != code || p.BaseOffset != base {
		t.Errorf("response %d: %v at base offset %d, want %v at %d", binary.BigEndian.Uint32(body), kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, kerr.ErrorForCode(code), base)
	}
}
