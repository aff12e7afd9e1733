package quorum

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLogger logs at warn level, or debug with QUORUM_DEBUG set.
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("QUORUM_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// faults cuts links between voters and damages messages; both transports
// consult it.
type faults struct {
	mu  sync.Mutex
	cut map[[2]int32]bool // from, to
	// damage is, per receiving voter, how many of the next messages with
	// entry data it gets with the last byte of their last entry flipped
	// (the batch's CRC-32C no longer matches).
	damage map[int32]int
	// drop, when set, is asked of every message voter sender sends
	// (those raft forwards for another included): true drops it.
	drop func(sender int32, m *raftpb.Message) bool
}

// damaged returns m, or a copy of it damaged as f.damage asks for to.
func (f *faults) damaged(to int32, m *raftpb.Message) *raftpb.Message {
	ents := m.GetEntries()
	if len(ents) == 0 || len(ents[len(ents)-1].GetData()) == 0 {
		return m
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.damage[to] <= 0 {
		return m
	}
	f.damage[to]--
	c := proto.Clone(m).(*raftpb.Message)
	d := c.GetEntries()[len(ents)-1].GetData()
	d[len(d)-1] ^= 0x40
	return c
}

// damageLeft is how many messages to id are left to damage.
func (f *faults) damageLeft(id int32) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.damage[id]
}

func (f *faults) isCut(from, to int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cut[[2]int32{from, to}]
}

// isolate cuts every link between id and the others, both ways.
func (f *faults) isolate(id int32, others []int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range others {
		if o != id {
			f.cut[[2]int32{id, o}] = true
			f.cut[[2]int32{o, id}] = true
		}
	}
}

func (f *faults) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.cut)
}

// faultTransport drops the messages of cut links, in and out.
type faultTransport struct {
	Transport
	f    *faults
	self int32
}

func (ft *faultTransport) Start(receive func(*raftpb.Message), unreachable func(int32)) error {
	return ft.Transport.Start(func(m *raftpb.Message) {
		if !ft.f.isCut(nodeID(m.GetFrom()), ft.self) {
			receive(ft.f.damaged(ft.self, m))
		}
	}, unreachable)
}

func (ft *faultTransport) Send(m *raftpb.Message) {
	ft.f.mu.Lock()
	drop := ft.f.drop != nil && ft.f.drop(ft.self, m)
	ft.f.mu.Unlock()
	if !drop && !ft.f.isCut(ft.self, nodeID(m.GetTo())) {
		ft.Transport.Send(m)
	}
}

// memNet is an in-memory network for synctest: Send encodes the message
// and the receiver decodes it, as over TCP, synchronously.
type memNet struct {
	mu  sync.Mutex
	rcv map[int32]func(*raftpb.Message)
}

type memTransport struct {
	n    *memNet
	self int32
}

func (mt *memTransport) Start(receive func(*raftpb.Message), _ func(int32)) error {
	mt.n.mu.Lock()
	defer mt.n.mu.Unlock()
	mt.n.rcv[mt.self] = receive
	return nil
}

func (mt *memTransport) Send(m *raftpb.Message) {
	mt.n.mu.Lock()
	rcv := mt.n.rcv[nodeID(m.GetTo())]
	mt.n.mu.Unlock()
	if rcv == nil {
		return
	}
	b, err := appendFrame(nil, m)
	if err != nil {
		panic(err)
	}
	got, err := readFrame(bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	rcv(got)
}

func (mt *memTransport) Close() error {
	mt.n.mu.Lock()
	defer mt.n.mu.Unlock()
	delete(mt.n.rcv, mt.self)
	return nil
}

// recorder is a Listener keeping what it was given.
type recorder struct {
	mu      sync.Mutex
	commits []commitRec
	leader  Leadership
	leaders int // LeaderChange calls
	poke    func()
}

type commitRec struct {
	offset int64
	recs   []metadata.Record
}

func (rc *recorder) listener() Listener {
	return Listener{
		Commit: func(off int64, recs []metadata.Record) {
			rc.mu.Lock()
			if n := len(rc.commits); n > 0 && rc.commits[n-1].offset >= off {
				panic(fmt.Sprintf("commit at %d after %d", off, rc.commits[n-1].offset))
			}
			rc.commits = append(rc.commits, commitRec{off, recs})
			rc.mu.Unlock()
			rc.poke()
		},
		LeaderChange: func(l Leadership) {
			rc.mu.Lock()
			rc.leader = l
			rc.leaders++
			rc.mu.Unlock()
			rc.poke()
		},
	}
}

func (rc *recorder) state() ([]commitRec, Leadership) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.commits), rc.leader
}

// harness runs voters over TCP on loopback (real time) or over memNet
// (for testing/synctest).
type harness struct {
	t       testing.TB
	dir     string
	mem     *memNet // nil: TCP
	f       *faults
	voters  []config.Voter
	ids     []int32
	lns     map[int32]net.Listener // TCP listeners not yet handed to a node
	nodes   map[int32]*testNode
	events  chan struct{}
	tick    time.Duration
	segment int64 // storage segment.bytes, 0 default

	rmu   sync.Mutex      // guards rafts
	rafts map[int32]*Raft // running voters, for observers' fetches
}

// raft is the running voter id, or nil; safe from any goroutine.
func (h *harness) raft(id int32) *Raft {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	return h.rafts[id]
}

func (h *harness) setRaft(id int32, r *Raft) {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	if r == nil {
		delete(h.rafts, id)
	} else {
		h.rafts[id] = r
	}
}

type testNode struct {
	id    int32
	log   *storage.Log
	r     *Raft
	rec   *recorder
	unreg func()
}

func newHarness(t testing.TB, n int, mem bool) *harness {
	t.Helper()
	h := &harness{
		t:      t,
		dir:    t.TempDir(),
		f:      &faults{cut: map[[2]int32]bool{}, damage: map[int32]int{}},
		lns:    map[int32]net.Listener{},
		nodes:  map[int32]*testNode{},
		events: make(chan struct{}, 1),
		tick:   20 * time.Millisecond,
		rafts:  map[int32]*Raft{},
	}
	if mem {
		h.mem = &memNet{rcv: map[int32]func(*raftpb.Message){}}
		h.tick = 100 * time.Millisecond
	}
	for i := range n {
		id := int32(i + 1)
		h.ids = append(h.ids, id)
		v := config.Voter{ID: id, Host: "127.0.0.1", Port: 1}
		if !mem {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			h.lns[id] = ln
			v.Port = ln.Addr().(*net.TCPAddr).Port
		}
		h.voters = append(h.voters, v)
	}
	t.Cleanup(func() {
		for _, id := range h.ids {
			if h.nodes[id] != nil {
				h.stop(id)
			}
		}
		for _, ln := range h.lns {
			ln.Close()
		}
	})
	return h
}

func (h *harness) poke() {
	select {
	case h.events <- struct{}{}:
	default:
	}
}

func (h *harness) startAll() {
	for _, id := range h.ids {
		h.start(id)
	}
}

// start opens node id's log and voter and registers a recorder from 0.
func (h *harness) start(id int32) *testNode {
	h.t.Helper()
	l, err := storage.Open(storage.OpenOptions{
		Dir:    filepath.Join(h.dir, fmt.Sprint("node", id), MetadataTopic+"-0"),
		Config: storage.Config{SegmentBytes: h.segment},
		Logger: testLogger(h.t),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	var tr Transport
	if h.mem != nil {
		tr = &memTransport{n: h.mem, self: id}
	} else {
		ln := h.lns[id]
		delete(h.lns, id)
		if ln == nil {
			addr := h.voters[slices.Index(h.ids, id)].Addr()
			if ln, err = net.Listen("tcp", addr); err != nil {
				h.t.Fatal(err)
			}
		}
		tcp, err := NewTCPTransport(TCPConfig{NodeID: id, Voters: h.voters, Listener: ln, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: testLogger(h.t)})
		if err != nil {
			h.t.Fatal(err)
		}
		tr = tcp
	}
	r, err := OpenRaft(RaftConfig{
		NodeID:       id,
		Voters:       h.voters,
		Log:          l,
		Transport:    &faultTransport{Transport: tr, f: h.f, self: id},
		TickInterval: h.tick,
		Logger:       testLogger(h.t),
	})
	if err != nil {
		l.Close()
		h.t.Fatal(err)
	}
	n := &testNode{id: id, log: l, r: r, rec: &recorder{poke: h.poke}}
	n.unreg = r.Register(0, n.rec.listener())
	h.nodes[id] = n
	h.setRaft(id, r)
	return n
}

// stop closes node id's voter and log (a clean stop: for the quorum, a
// crash of the process differs only in the commit index not written).
func (h *harness) stop(id int32) {
	h.t.Helper()
	n := h.nodes[id]
	delete(h.nodes, id)
	h.setRaft(id, nil)
	n.unreg()
	if err := n.r.Close(); err != nil {
		h.t.Errorf("closing node %d: %v", id, err)
	}
	if err := n.log.Close(); err != nil {
		h.t.Errorf("closing log of node %d: %v", id, err)
	}
}

// waitFor waits, without sleeping, until cond holds after some listener
// event, failing the test after timeout.
func (h *harness) waitFor(what string, timeout time.Duration, cond func() bool) {
	h.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-h.events:
		case <-deadline.C:
			h.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// leader is the running node among ids (nil: all) whose listener was
// told it leads, in the highest epoch, or -1.
func (h *harness) leader(ids []int32) int32 {
	lead := int32(-1)
	var epoch int64
	for _, id := range h.running(ids) {
		if _, l := h.nodes[id].rec.state(); l.LeaderID == id && l.Epoch >= epoch {
			lead, epoch = id, l.Epoch
		}
	}
	return lead
}

// running is ids (nil: all) that are running.
func (h *harness) running(ids []int32) []int32 {
	if ids == nil {
		ids = h.ids
	}
	var out []int32
	for _, id := range ids {
		if h.nodes[id] != nil {
			out = append(out, id)
		}
	}
	return out
}

// agreedLeader is leader(ids) once every running node of ids names it in
// its epoch.
func (h *harness) agreedLeader(ids []int32) int32 {
	lead := h.leader(ids)
	if lead < 0 {
		return -1
	}
	_, ll := h.nodes[lead].rec.state()
	for _, id := range h.running(ids) {
		if _, l := h.nodes[id].rec.state(); l != ll {
			return -1
		}
	}
	return lead
}

// waitLeader waits for an agreed leader among ids (nil: all running).
func (h *harness) waitLeader(ids []int32, timeout time.Duration) int32 {
	h.t.Helper()
	var lead int32
	h.waitFor("an agreed leader", timeout, func() bool { lead = h.agreedLeader(ids); return lead >= 0 })
	return lead
}

// appendOn appends a ProducerIDsRecord numbered seq on node id.
func (h *harness) appendOn(ctx context.Context, id int32, seq int64) (int64, error) {
	return h.nodes[id].r.Append(ctx, []metadata.Record{seqRecord(seq)})
}

func seqRecord(seq int64) metadata.Record {
	return metadata.ProducerIDsRecord{BrokerID: 1, NextProducerID: seq}
}

// mustAppend appends seq on the leader agreed among ids (nil: all
// running), retrying while leadership moves, and returns the offset.
func (h *harness) mustAppend(ids []int32, seq int64) int64 {
	h.t.Helper()
	off, err := h.appendRetrying(ids, seq, 20*time.Second)
	if err != nil {
		h.t.Fatalf("append %d: %v", seq, err)
	}
	return off
}

// appendSeqs appends first to last (mustAppend) and notes each offset's
// seq in want.
func (h *harness) appendSeqs(want map[int64]int64, first, last int64) {
	h.t.Helper()
	for seq := first; seq <= last; seq++ {
		want[h.mustAppend(nil, seq)] = seq
	}
}

// appendRetrying appends seq on the leader agreed among ids (nil: all
// running), again on the next leader while leadership moves (a leader
// that hears from no quorum for ElectionTicks steps down, which a loaded
// machine can cause at any time), until within has passed. It returns the
// offset or the last error, without failing the test, so that several
// goroutines may call it. After a lost leadership the entry may be
// committed twice (Append's contract): the offset returned is the one
// whose commit was seen.
func (h *harness) appendRetrying(ids []int32, seq int64, within time.Duration) (int64, error) {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(h.tick)
	defer tick.Stop()
	err := errors.New("no agreed leader")
	for time.Now().Before(deadline) {
		if lead := h.agreedLeader(ids); lead >= 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var off int64
			off, err = h.appendOn(ctx, lead, seq)
			cancel()
			if err == nil {
				return off, nil
			}
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrDropped) && !errors.Is(err, context.DeadlineExceeded) {
				return 0, fmt.Errorf("on %d: %w", lead, err)
			}
			continue
		}
		select {
		case <-h.events:
		case <-tick.C:
		}
	}
	return 0, fmt.Errorf("still failing after %v: %w", within, err)
}

// hasCommit reports whether node id's listener got seq at offset.
func (h *harness) hasCommit(id int32, offset, seq int64) bool {
	commits, _ := h.nodes[id].rec.state()
	i, ok := slices.BinarySearchFunc(commits, offset, func(c commitRec, o int64) int { return int(c.offset - o) })
	return ok && len(commits[i].recs) == 1 && commits[i].recs[0] == seqRecord(seq)
}

// waitCommitted waits until every running node's listener got every
// (offset, seq) of want.
func (h *harness) waitCommitted(want map[int64]int64, timeout time.Duration) {
	h.t.Helper()
	h.waitFor(fmt.Sprintf("%d commits on every node", len(want)), timeout, func() bool {
		for id := range h.nodes {
			for off, seq := range want {
				if !h.hasCommit(id, off, seq) {
					return false
				}
			}
		}
		return true
	})
}

// storedEntry is one batch of a node's log, as compared between voters.
type storedEntry struct {
	offset, next int64
	epoch        int32
	control      bool
	data         string // the batch of a normal entry
}

func readLog(t testing.TB, l *storage.Log, to int64) []storedEntry {
	t.Helper()
	var out []storedEntry
	err := readBatches(l, 0, to, func(b []byte, hd record.Header) error {
		e := storedEntry{offset: hd.BaseOffset, next: hd.NextOffset(), epoch: hd.PartitionLeaderEpoch, control: hd.IsControl()}
		if !e.control {
			e.data = string(b)
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
