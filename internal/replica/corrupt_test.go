package replica

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/testutil"
	"github.com/samsahq/samsa/internal/wire"
)

// fakeLeader is broker 2 leading testTP, holding log (whole batches from
// offset 0, high-watermark at its end), over a real TCP listener on
// loopback: it answers a follower's Fetch requests (no session) with the
// batches from the fetch offset on, after damage has had its way with
// them, and records each request's fetch offset.
type fakeLeader struct {
	ln     net.Listener
	log    []byte
	hw     int64
	damage func(i int, records []byte) []byte // i: how many responses with records came before
	closed chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	offsets []int64    // each Fetch's offset for testTP, in order
	served  int        // responses with records
	conns   []net.Conn
}

func startFakeLeader(t *testing.T, log []byte, hw int64, damage func(int, []byte) []byte) *fakeLeader {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &fakeLeader{ln: ln, log: log, hw: hw, damage: damage, closed: make(chan struct{})}
	l.wg.Go(l.accept)
	t.Cleanup(l.close)
	return l
}

func (l *fakeLeader) close() {
	close(l.closed)
	l.ln.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *fakeLeader) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
		l.wg.Go(func() { l.serve(c) })
	}
}

func (l *fakeLeader) serve(c net.Conn) {
	defer c.Close()
	versions := wire.NewVersions()
	versions.Add(kmsg.Fetch, 0, 17)
	for {
		frame, err := wire.ReadFrame(c, nil, 1<<20)
		if err != nil {
			return
		}
		req, err := wire.ParseRequest(frame, versions)
		if err != nil {
			return
		}
		fetch, ok := req.Body.(*kmsg.FetchRequest)
		if !ok {
			return
		}
		resp := fetch.ResponseKind().(*kmsg.FetchResponse)
		resp.SetVersion(req.Version)
		for _, rt := range fetch.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.HighWatermark, sp.LastStableOffset = l.hw, l.hw
				sp.RecordBatches = l.records(rp.FetchOffset)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 && resp.Topics[0].Partitions[0].RecordBatches == nil {
			// Caught up: hold the fetch for its max wait, as a leader
			// does, instead of answering at once.
			select {
			case <-l.closed:
				return
			case <-time.After(time.Duration(fetch.MaxWaitMillis) * time.Millisecond):
			}
		}
		if _, err := c.Write(wire.AppendResponse(nil, req.CorrelationID, resp)); err != nil {
			return
		}
	}
}

// records returns the log's batches from offset on, damaged, and notes the
// fetch.
func (l *fakeLeader) records(offset int64) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.offsets = append(l.offsets, offset)
	var out []byte
	record.Batches(l.log, func(b []byte, h record.Header) error {
		if h.BaseOffset >= offset {
			out = append(out, b...)
		}
		return nil
	})
	if out == nil {
		return nil
	}
	out = l.damage(l.served, out)
	l.served++
	return out
}

// fetchOffsets returns the fetch offsets asked for so far.
func (l *fakeLeader) fetchOffsets() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.offsets...)
}

// A follower checks the CRC of the batches it fetches, as Kafka's does
// (UnifiedLog.appendAsFollower, a CorruptRecordException failing the
// partition's fetch): a response whose second batch had one byte flipped
// on the way is not stored at all (the next fetch asks for offset 0
// again, after replica.fetch.backoff.ms) and the high-watermark stays;
// the same batches undamaged are then stored, byte for byte the leader's.
func TestFollowerRefusesCorruptBatch(t *testing.T) {
	leaderLog := append(batch(t, 0, 0, 5), batch(t, 5, 0, 5)...)
	leader := startFakeLeader(t, leaderLog, 10, func(i int, records []byte) []byte {
		if i > 0 {
			return records
		}
		bad := bytes.Clone(records)
		bad[len(bad)-1] ^= 0x20 // the last record's value, in the second batch
		return bad
	})
	logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{t.TempDir()}, NodeID: 1, ClusterID: "replica-test"})
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(logs, Options{NodeID: 1, Controller: noController{}, LeaderAddr: func(id int32) (string, bool) {
		return leader.ln.Addr().String(), id == 2
	}})
	t.Cleanup(func() {
		m.Close()
		logs.Close()
	})
	p, err := m.Apply(testTP, [16]byte{1}, State{Leader: 2, LeaderEpoch: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// The fetcher applies a response before it sends the next request:
	// the second request shows what the corrupt response left.
	testutil.WaitFor(t, 30*time.Second, "a fetch after the corrupt response", func() bool { return len(leader.fetchOffsets()) >= 2 })
	if got := leader.fetchOffsets()[:2]; got[0] != 0 || got[1] != 0 {
		t.Fatalf("fetch offsets %v after a corrupt second batch, want [0 0]: the first batch or more was stored", got)
	}
	testutil.WaitFor(t, 30*time.Second, "the follower to store the undamaged batches", func() bool {
		return p.LogEndOffset() == 10 && p.HighWatermark() == 10
	})
	res, err := p.Read(0, 1<<20, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Records, leaderLog) {
		t.Fatalf("follower's log (%d bytes) differs from the leader's (%d bytes)", len(res.Records), len(leaderLog))
	}
}

// checkFetchedBatches refuses a damaged batch anywhere in a fetch, and a
// partial batch at its end, and takes whole undamaged batches.
func TestCheckFetchedBatches(t *testing.T) {
	good := append(batch(t, 0, 0, 3), batch(t, 3, 0, 2)...)
	first := len(batch(t, 0, 0, 3))
	for _, tc := range []struct {
		name string
		b    func() []byte
		want error
	}{
		{"whole", func() []byte { return good }, nil},
		{"empty", func() []byte { return nil }, nil},
		{"first batch's records", func() []byte { b := bytes.Clone(good); b[first-1] ^= 1; return b }, record.ErrCorrupt},
		{"second batch's attributes", func() []byte { b := bytes.Clone(good); b[first+21] ^= 1; return b }, record.ErrCorrupt},
		{"crc field", func() []byte { b := bytes.Clone(good); b[17] ^= 1; return b }, record.ErrCorrupt},
		{"partial batch", func() []byte { return good[:len(good)-1] }, record.ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkFetchedBatches(tc.b())
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("checkFetchedBatches: %v, want %v", err, tc.want)
			}
		})
	}
}

// megabyteBatch is one batch of about 1 MiB (1,024 records of 1 KiB), the
// size of a follower's fetch of one partition (replica.fetch.max.bytes).
func megabyteBatch(b *testing.B) []byte {
	b.Helper()
	recs := make([]record.Record, 1024)
	for i := range recs {
		v := make([]byte, 1024)
		for j := range v {
			v[j] = byte(i + j)
		}
		recs[i] = record.Record{OffsetDelta: int32(i), Value: v}
	}
	out, err := record.Build(record.Spec{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence, BaseTimestamp: 1}, recs)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkFollowerCRC measures what checking the CRC of fetched batches
// costs a follower: the CRC-32C of a 1 MiB batch alone (crc), and a
// follower's append of 1 MiB batches (append), which reports the time of
// the check and of the log's append apart, measured in the same
// iterations (crc-ns/op, log-ns/op), and the check's share of the two
// (crc-%): on a noisy machine the two sub-benchmarks run at different
// moments, the metrics of one loop do not.
func BenchmarkFollowerCRC(b *testing.B) {
	mb := megabyteBatch(b)
	b.Run("crc", func(b *testing.B) {
		b.SetBytes(int64(len(mb)))
		for b.Loop() {
			if err := checkFetchedBatches(mb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{b.TempDir()}, NodeID: 1, ClusterID: "replica-bench"})
		if err != nil {
			b.Fatal(err)
		}
		m := NewManager(logs, Options{NodeID: 1, Controller: noController{}, LeaderAddr: func(int32) (string, bool) { return "", false }})
		defer func() {
			m.Close()
			logs.Close()
		}()
		p, err := m.Apply(testTP, [16]byte{1}, State{Leader: 2, LeaderEpoch: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, LogConfig{SegmentBytes: 64 << 20})
		if err != nil {
			b.Fatal(err)
		}
		buf := bytes.Clone(mb)
		b.SetBytes(int64(len(buf)))
		var crc, app time.Duration
		next := int64(0)
		for b.Loop() {
			record.SetBaseOffset(buf, next) // the CRC does not cover it
			t0 := time.Now()
			if err := checkFetchedBatches(buf); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := p.log.AppendAsFollower(buf); err != nil {
				b.Fatal(err)
			}
			crc, app = crc+t1.Sub(t0), app+time.Since(t1)
			next += 1024
		}
		b.ReportMetric(float64(crc.Nanoseconds())/float64(b.N), "crc-ns/op")
		b.ReportMetric(float64(app.Nanoseconds())/float64(b.N), "log-ns/op")
		b.ReportMetric(100*float64(crc)/float64(crc+app), "crc-%")
	})
}

// FuzzCheckFetchedBatches: fetched bytes never panic the check; bytes it
// takes are whole batches with good CRCs, and any byte of them changed
// from a batch's CRC field on (the CRC and what it covers) is refused.
func FuzzCheckFetchedBatches(f *testing.F) {
	var good []byte
	for _, base := range []int64{0, 3} {
		b, err := record.Build(record.Spec{BaseOffset: base, ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch,
			BaseSequence: record.NoSequence, BaseTimestamp: 1}, []record.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}})
		if err != nil {
			f.Fatal(err)
		}
		good = append(good, b...)
	}
	f.Add(good, uint(30), byte(1))
	f.Add(good[:40], uint(0), byte(0x80))
	f.Add([]byte{}, uint(0), byte(1))
	f.Fuzz(func(t *testing.T, b []byte, at uint, flip byte) {
		if checkFetchedBatches(b) != nil || len(b) == 0 || flip == 0 {
			return
		}
		var starts []int // where each batch starts
		pos := 0
		if _, err := record.Batches(b, func(bb []byte, _ record.Header) error {
			if !record.CRCValid(bb) {
				t.Fatal("a batch with a bad CRC was taken")
			}
			starts = append(starts, pos)
			pos += len(bb)
			return nil
		}); err != nil {
			t.Fatalf("taken bytes are not whole batches: %v", err)
		}
		i := int(at % uint(len(b)))
		start := 0
		for _, s := range starts {
			if s <= i {
				start = s
			}
		}
		if i-start < 17 { // base offset, length, leader epoch, magic: not covered
			return
		}
		bad := bytes.Clone(b)
		bad[i] ^= flip
		if checkFetchedBatches(bad) == nil {
			t.Fatalf("byte %d (%d into its batch) changed and taken", i, i-start)
		}
	})
}
