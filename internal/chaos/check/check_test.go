package check

import (
	"bytes"
	"testing"
)

// h builds a history from completions (each gets an invocation before it)
// and numbers the ops.
func h(completions ...Op) []Op {
	var ops []Op
	for i, c := range completions {
		ops = append(ops, Op{Type: Invoke, Process: c.Process, F: c.F, Time: int64(2 * i)})
		if c.Time == 0 {
			c.Time = int64(2*i + 1)
		}
		ops = append(ops, c)
	}
	for i := range ops {
		ops[i].Index = i
	}
	return ops
}

func send(proc int, typ string, p int32, v, off int64) Op {
	return Op{Type: typ, Process: proc, F: FSend, Mops: []Mop{{F: FSend, Partition: p, Value: v, Offset: off}}}
}

func poll(proc int, rc bool, mops ...Mop) Op {
	return Op{Type: OK, Process: proc, F: FPoll, ReadCommitted: rc, Mops: mops}
}

func rec(p int32, v, off int64) Mop { return Mop{F: FPoll, Partition: p, Value: v, Offset: off} }

func hw(proc int, p int32, off int64) Op {
	return Op{Type: OK, Process: proc, F: FHW, Mops: []Mop{{F: FHW, Partition: p, Value: -1, Offset: off}}}
}

func txn(proc int, typ string, commit int64, mops ...Mop) Op {
	return Op{Type: typ, Process: proc, F: FTxn, CommitTime: commit, ReadCommitted: true, Mops: mops}
}

// txnAt is a committed transaction completed at op index i and time at,
// its commit begun at commit.
func txnAt(i, proc int, at, commit int64, mops ...Mop) Op {
	o := txn(proc, OK, commit, mops...)
	o.Index, o.Time = i, at
	return o
}

func tsend(p int32, v, off int64) Mop { return Mop{F: FSend, Partition: p, Value: v, Offset: off} }

func TestAnalyze(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		want map[string]int // kinds and counts; empty: valid
	}{
		{"clean", h(
			send(1, OK, 0, 1, 0), send(1, OK, 0, 2, 1), send(1, Fail, 0, 3, -1), send(1, Info, 1, 4, -1),
			hw(2, 0, 2), poll(2, false, rec(0, 1, 0), rec(0, 2, 1)), hw(2, 0, 2),
			poll(3, true, rec(0, 1, 0)), poll(3, true, rec(0, 2, 1)),
		), nil},
		{"clean transactions", h(
			txn(1, OK, 3, tsend(0, 10, 0), tsend(1, 11, 0)),
			txn(1, Fail, 0, tsend(0, 12, 1)),
			send(2, OK, 0, 13, 3),
			poll(3, true, rec(0, 10, 0), rec(0, 13, 3), rec(1, 11, 0)),
			poll(4, false, rec(0, 10, 0), rec(0, 12, 1), rec(0, 13, 3)),
		), nil},
		{"lost write", h(
			send(1, OK, 0, 1, 0), send(1, OK, 0, 2, 1), send(1, OK, 0, 3, 2),
			poll(2, false, rec(0, 1, 0), rec(0, 3, 2)),
		), map[string]int{LostWrite: 1}},
		{"unseen", h(
			send(1, OK, 0, 1, 0), send(1, OK, 0, 2, 1),
			poll(2, false, rec(0, 1, 0)),
		), map[string]int{Unseen: 1}},
		{"inconsistent offset", h(
			send(1, OK, 0, 1, 0), poll(2, false, rec(0, 2, 0)),
		), map[string]int{InconsistentOffset: 1, Unseen: 1}},
		{"duplicate", h(
			send(1, OK, 0, 1, 0), poll(2, false, rec(0, 1, 0), rec(0, 1, 1)),
		), map[string]int{Duplicate: 1}},
		{"nonmonotonic poll", h(
			send(1, OK, 0, 1, 0), send(1, OK, 0, 2, 1),
			poll(2, false, rec(0, 1, 0), rec(0, 2, 1)), poll(2, false, rec(0, 1, 0)),
		), map[string]int{NonMonotonicPoll: 1}},
		{"nonmonotonic send", h(
			send(1, OK, 0, 1, 1), send(1, OK, 0, 2, 0),
			poll(2, false, rec(0, 2, 0), rec(0, 1, 1)),
		), map[string]int{NonMonotonicSend: 1}},
		{"aborted read", h(
			txn(1, Fail, 0, tsend(0, 1, 0)),
			poll(2, true, rec(0, 1, 0)),
		), map[string]int{AbortedRead: 1}},
		{"aborted data read uncommitted is fine", h(
			txn(1, Fail, 0, tsend(0, 1, 0)),
			poll(2, false, rec(0, 1, 0)),
		), nil},
		{"uncommitted read", h(
			txn(1, Info, 0, tsend(0, 1, 0)),
			poll(2, true, rec(0, 1, 0)),
		), map[string]int{UncommittedRead: 1}},
		{"read before the commit began", h(
			txn(1, OK, 100, tsend(0, 1, 0)),
			poll(2, true, rec(0, 1, 0)),
		), map[string]int{UncommittedRead: 1}},
		{"hw decrease", h(
			hw(1, 0, 10), hw(1, 0, 7), hw(2, 0, 5),
		), map[string]int{HWDecrease: 1}},
		{"G1c ww and wr", h(
			// T1 (op 1) writes 1 at offset 0 of partition 0, T2 (op 3)
			// writes 2 after it (ww T1->T2), and T1 read 3, which T2
			// wrote (wr T2->T1).
			txn(1, OK, 1, tsend(0, 1, 0), rec(1, 3, 0)),
			txn(2, OK, 1, tsend(0, 2, 1), tsend(1, 3, 0)),
			poll(3, false, rec(0, 1, 0), rec(0, 2, 1), rec(1, 3, 0)),
		), map[string]int{G1c: 1}},
		{"G1c across time", h(
			// T2 runs after T1 ended; in partition 0 T2's write lies
			// below T1's (ww T2->T1), in partition 1 above it (ww
			// T1->T2), and T1 read T2's value 3 (wr T2->T1, and a read
			// before T2's commit began).
			txn(1, OK, 1, tsend(0, 1, 1), tsend(1, 4, 0), rec(1, 3, 1)),
			txn(2, OK, 3, tsend(0, 2, 0), tsend(1, 3, 1)),
			poll(3, false, rec(0, 2, 0), rec(0, 1, 1), rec(1, 4, 0), rec(1, 3, 1)),
		), map[string]int{G1c: 1, UncommittedRead: 1}},
		{"concurrent transactions interleave their writes", []Op{
			// T1 and T2 overlap in time; T1 wrote offsets 0 and 2 of
			// partition 0, T2 offset 1 between them (seed 9102 of the
			// chaos harness, two transactional producers): no anomaly.
			{Index: 0, Type: Invoke, Process: 1, F: FTxn, Time: 0},
			{Index: 1, Type: Invoke, Process: 2, F: FTxn, Time: 1},
			txnAt(2, 1, 5, 4, tsend(0, 1, 0), tsend(0, 3, 2)),
			txnAt(3, 2, 6, 4, tsend(0, 2, 1)),
			{Index: 4, Type: Invoke, Process: 3, F: FPoll, Time: 7},
			{Index: 5, Type: OK, Process: 3, F: FPoll, Time: 8, Mops: []Mop{rec(0, 1, 0), rec(0, 2, 1), rec(0, 3, 2)}},
		}, nil},
		{"no G1c in a chain", h(
			txn(1, OK, 1, tsend(0, 1, 0)),
			txn(2, OK, 1, tsend(0, 2, 1), rec(0, 1, 0)),
			poll(3, false, rec(0, 1, 0), rec(0, 2, 1)),
		), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Analyze(tc.ops)
			got := map[string]int{}
			for k, f := range r.Anomalies {
				got[k] = f.Count
			}
			if len(got) != len(tc.want) {
				t.Fatalf("anomalies %v, want %v (%+v)", got, tc.want, r.Anomalies)
			}
			for k, n := range tc.want {
				if got[k] != n {
					t.Fatalf("anomalies %v, want %v (%+v)", got, tc.want, r.Anomalies)
				}
			}
			if tc.name == "clean" && (r.Failed[FSend] != 1 || r.Unknown[FSend] != 1) {
				t.Fatalf("failed %v unknown %v, want one send each", r.Failed, r.Unknown)
			}
			if r.Valid != (len(tc.want) == 0) {
				t.Fatalf("valid %v with %v", r.Valid, got)
			}
		})
	}
}

// TestRoundTrip writes a history with a Recorder and reads it back.
func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	rc := NewRecorder(&buf)
	rc.Record(Op{Type: Invoke, Process: 1, F: FSend, Mops: []Mop{{F: FSend, Partition: 2, Value: 7, Offset: -1}}})
	rc.Record(send(1, OK, 2, 7, 41))
	if err := rc.Flush(); err != nil {
		t.Fatal(err)
	}
	ops, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[1].Index != 1 || ops[1].Mops[0].Offset != 41 || ops[1].Type != OK {
		t.Fatalf("read back %+v", ops)
	}
	if r := Analyze(ops); r.Anomalies[Unseen] == nil || r.Anomalies[Unseen].Count != 1 {
		t.Fatalf("analysis of the read history: %+v", r)
	}
}
