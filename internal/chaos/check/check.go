package check

import (
	"fmt"
	"slices"
	"sort"
)

// Anomaly kinds, as Jepsen's Kafka analyses name them.
const (
	LostWrite          = "lost-write"          // acknowledged, below the highest offset polled, read by no one
	Unseen             = "unseen"              // acknowledged and never polled by the end
	InconsistentOffset = "inconsistent-offset" // two values at one offset
	Duplicate          = "duplicate"           // one value at two offsets
	NonMonotonicPoll   = "nonmonotonic-poll"   // a consumer's offsets did not increase
	NonMonotonicSend   = "nonmonotonic-send"   // a producer's acknowledged offsets did not increase
	AbortedRead        = "aborted-read"        // read_committed saw an aborted transaction's value
	UncommittedRead    = "uncommitted-read"    // read_committed saw a value before its commit began
	HWDecrease         = "hw-decrease"         // a consumer was served a lower high-watermark than before
	G1c                = "G1c"                 // a cycle of ww/wr dependencies between transactions
)

// Kinds lists every anomaly kind in report order.
var Kinds = []string{LostWrite, Unseen, InconsistentOffset, Duplicate, NonMonotonicPoll, NonMonotonicSend, AbortedRead, UncommittedRead, HWDecrease, G1c}

// maxExamples bounds the examples kept per kind.
const maxExamples = 8

// Found is the count and first examples of one anomaly kind.
type Found struct {
	Count    int      `json:"count"`
	Examples []string `json:"examples,omitempty"`
}

// Result is a history's analysis.
type Result struct {
	Valid bool `json:"valid"` // no anomaly at all
	Ops   int  `json:"ops"`   // completions in the history
	OK    int  `json:"ok"`    // completions of type ok
	// Failed and Unknown count the fail and info completions by function
	// (send, poll, txn, hw): not anomalies, but a run where most
	// transactions fail checks little.
	Failed    map[string]int    `json:"failed,omitempty"`
	Unknown   map[string]int    `json:"unknown,omitempty"`
	Anomalies map[string]*Found `json:"anomalies"` // by kind, only those found
}

// Count is the number of anomalies of every kind.
func (r *Result) Count() int {
	n := 0
	for _, f := range r.Anomalies {
		n += f.Count
	}
	return n
}

func (r *Result) add(kind, format string, args ...any) {
	f := r.Anomalies[kind]
	if f == nil {
		f = &Found{}
		r.Anomalies[kind] = f
	}
	f.Count++
	if len(f.Examples) < maxExamples {
		f.Examples = append(f.Examples, fmt.Sprintf(format, args...))
	}
}

// po is a partition and offset.
type po struct {
	p int32
	o int64
}

// write is what is known of one value's send.
type write struct {
	op        int    // index of the completion
	txn       bool   // sent in a transaction
	status    string // OK, Fail or Info
	commitAt  int64  // txn: when the commit was invoked, 0 if never
	partition int32
	offset    int64 // -1 unknown
}

// Analyze checks a history. Operations still pending at the end count as
// Info.
func Analyze(ops []Op) *Result {
	r := &Result{Anomalies: map[string]*Found{}, Failed: map[string]int{}, Unknown: map[string]int{}}
	writes := map[int64]*write{}     // by value
	at := map[po]int64{}             // value seen at each offset
	offsetsOf := map[int64][]int64{} // offsets each value was seen at
	polled := map[int64]bool{}       // values read by anyone
	maxPolled := map[int32]int64{}   // highest offset polled per partition
	lastPoll := map[[2]int64]int64{} // (process, partition) -> last offset polled
	lastSend := map[[2]int64]int64{} // (process, partition) -> last offset acknowledged
	lastHW := map[[2]int64]int64{}   // (process, partition) -> last high-watermark
	type read struct {
		op            int
		readCommitted bool
		time          int64
		value         int64
		txn           int // the reading transaction's op, -1 if none
	}
	var reads []read

	see := func(p int32, off, v int64, what string, op int) {
		if off < 0 {
			return
		}
		k := po{p, off}
		if old, ok := at[k]; ok && old != v {
			r.add(InconsistentOffset, "partition %d offset %d holds %d and %d (%s, op %d)", p, off, old, v, what, op)
		} else {
			at[k] = v
		}
		if offs := offsetsOf[v]; !slices.Contains(offs, off) {
			offsetsOf[v] = append(offs, off)
		}
	}

	invoked := map[int]int64{}  // process -> time of its pending invocation
	spans := map[int][2]int64{} // transaction (completion op) -> [invoked, completed] times
	for _, op := range ops {
		if op.Type == Invoke {
			invoked[op.Process] = op.Time
			continue
		}
		if op.F == FTxn {
			spans[op.Index] = [2]int64{invoked[op.Process], op.Time}
		}
		r.Ops++
		switch op.Type {
		case OK:
			r.OK++
		case Fail:
			r.Failed[op.F]++
		default:
			r.Unknown[op.F]++
		}
		txn := op.F == FTxn
		for _, m := range op.Mops {
			key := [2]int64{int64(op.Process), int64(m.Partition)}
			switch m.F {
			case FSend:
				w := &write{op: op.Index, txn: txn, status: op.Type, commitAt: op.CommitTime, partition: m.Partition, offset: -1}
				if op.Type == OK {
					w.offset = m.Offset
					see(m.Partition, m.Offset, m.Value, "send", op.Index)
					if m.Offset >= 0 {
						if last, ok := lastSend[key]; ok && m.Offset <= last {
							r.add(NonMonotonicSend, "process %d partition %d: acknowledged offset %d after %d (op %d)", op.Process, m.Partition, m.Offset, last, op.Index)
						}
						lastSend[key] = m.Offset
					}
				}
				writes[m.Value] = w
			case FPoll:
				if op.Type != OK {
					continue
				}
				see(m.Partition, m.Offset, m.Value, "poll", op.Index)
				polled[m.Value] = true
				if m.Offset > maxPolled[m.Partition] {
					maxPolled[m.Partition] = m.Offset
				}
				if last, ok := lastPoll[key]; ok && m.Offset <= last {
					r.add(NonMonotonicPoll, "process %d partition %d: polled offset %d after %d (op %d)", op.Process, m.Partition, m.Offset, last, op.Index)
				}
				lastPoll[key] = m.Offset
				t := -1
				if txn {
					t = op.Index
				}
				reads = append(reads, read{op.Index, op.ReadCommitted, op.Time, m.Value, t})
			case FHW:
				if op.Type != OK {
					continue
				}
				if last, ok := lastHW[key]; ok && m.Offset < last {
					r.add(HWDecrease, "process %d partition %d: high-watermark %d after %d (op %d)", op.Process, m.Partition, m.Offset, last, op.Index)
				}
				lastHW[key] = m.Offset
			}
		}
	}

	for v, offs := range offsetsOf {
		if len(offs) > 1 {
			slices.Sort(offs)
			r.add(Duplicate, "value %d at offsets %v", v, offs)
		}
	}
	for _, rd := range reads {
		w := writes[rd.value]
		if w == nil || !w.txn || !rd.readCommitted {
			continue
		}
		switch {
		case w.status == Fail:
			r.add(AbortedRead, "op %d read %d of aborted transaction op %d", rd.op, rd.value, w.op)
		case w.commitAt == 0 || rd.time < w.commitAt:
			r.add(UncommittedRead, "op %d read %d of transaction op %d before its commit", rd.op, rd.value, w.op)
		}
	}
	// Lost and unseen: acknowledged values in offset order.
	var acked []int64
	for v, w := range writes {
		if w.status == OK && w.offset >= 0 {
			acked = append(acked, v)
		}
	}
	sort.Slice(acked, func(i, j int) bool {
		a, b := writes[acked[i]], writes[acked[j]]
		return a.partition < b.partition || a.partition == b.partition && a.offset < b.offset
	})
	for _, v := range acked {
		w := writes[v]
		if polled[v] {
			continue
		}
		if max, ok := maxPolled[w.partition]; ok && w.offset < max {
			r.add(LostWrite, "value %d acknowledged at partition %d offset %d (op %d), below polled offset %d, read by no one", v, w.partition, w.offset, w.op, max)
		} else {
			r.add(Unseen, "value %d acknowledged at partition %d offset %d (op %d) never polled", v, w.partition, w.offset, w.op)
		}
	}
	g1c(r, writes, spans, reads2(reads, func(x read) (int, int64) { return x.txn, x.value }))
	r.Valid = len(r.Anomalies) == 0
	return r
}

// reads2 projects the reads made inside transactions to (txn op, value).
func reads2[T any](rs []T, f func(T) (int, int64)) [][2]int64 {
	var out [][2]int64
	for _, x := range rs {
		if t, v := f(x); t >= 0 {
			out = append(out, [2]int64{int64(t), v})
		}
	}
	return out
}

// g1c finds cycles among committed transactions over write-write edges
// (T1 wrote the record just before T2's in a partition's order of
// transactional writes) and write-read edges (T2 polled a value T1 wrote),
// as Adya's G1c, with Tarjan's strongly connected components.
//
// A write-write edge counts only between transactions that did not
// overlap in time (spans, by completion op): Kafka orders the records of
// concurrent transactions in a partition as their produce requests
// arrive, not as they commit, so two concurrent producers interleaving
// their writes in two partitions, or in one, make a write-write cycle
// (Adya's G0) that Kafka's transaction model allows (Jepsen's Redpanda
// 21.10.1 analysis, on write isolation in Kafka). What
// overlaps in time has no order that the log must follow.
func g1c(r *Result, writes map[int64]*write, spans map[int][2]int64, txnReads [][2]int64) {
	overlap := func(a, b int) bool {
		x, y := spans[a], spans[b]
		return x[0] <= y[1] && y[0] <= x[1]
	}
	edges := map[int][]int{}
	byPart := map[int32][]*write{}
	for _, w := range writes {
		if w.txn && w.status == OK && w.offset >= 0 {
			byPart[w.partition] = append(byPart[w.partition], w)
		}
	}
	for _, ws := range byPart {
		sort.Slice(ws, func(i, j int) bool { return ws[i].offset < ws[j].offset })
		for i := 1; i < len(ws); i++ {
			if a, b := ws[i-1].op, ws[i].op; a != b && !overlap(a, b) {
				edges[a] = append(edges[a], b)
			}
		}
	}
	for _, tr := range txnReads {
		w := writes[tr[1]]
		if w != nil && w.txn && w.status == OK && w.op != int(tr[0]) {
			edges[w.op] = append(edges[w.op], int(tr[0]))
		}
	}
	for _, scc := range sccs(edges) {
		if len(scc) > 1 {
			slices.Sort(scc)
			r.add(G1c, "transactions (completion ops) %v form a ww/wr cycle", scc)
		}
	}
}

// sccs returns the strongly connected components of a graph (Tarjan).
func sccs(edges map[int][]int) [][]int {
	index := map[int]int{}
	low := map[int]int{}
	on := map[int]bool{}
	var stack []int
	var out [][]int
	n := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = n, n
		n++
		stack = append(stack, v)
		on[v] = true
		for _, w := range edges[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				c = append(c, w)
				if w == v {
					break
				}
			}
			out = append(out, c)
		}
	}
	nodes := make([]int, 0, len(edges))
	for v := range edges {
		nodes = append(nodes, v)
	}
	slices.Sort(nodes)
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return out
}
