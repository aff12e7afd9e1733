package check

import (
	"bytes"
	"testing"
)

// FuzzAnalyze reads a history from arbitrary bytes (the history.jsonl a
// chaos run leaves on disk) and analyzes what it holds: neither may panic,
// and a history read back must analyze to the same counts twice.
func FuzzAnalyze(f *testing.F) {
	var buf bytes.Buffer
	rc := NewRecorder(&buf)
	for _, op := range h(
		send(1, OK, 0, 1, 0), send(1, OK, 0, 2, 1), send(1, Info, 1, 4, -1),
		hw(2, 0, 2), poll(2, false, rec(0, 1, 0), rec(0, 2, 1), rec(0, 1, 2)),
		txn(3, OK, 1, tsend(0, 5, 3), rec(1, 6, 0)),
		txn(4, OK, 1, tsend(0, 6, 4), tsend(1, 6, 0)),
		txn(4, Fail, 0, tsend(1, 7, 1)),
		poll(5, true, rec(1, 7, 1)),
	) {
		rc.Record(op)
	}
	if err := rc.Flush(); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"type":"ok","f":"txn","mops":[{"f":"poll","partition":-1,"value":-5,"offset":-9}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ops, _ := Read(bytes.NewReader(data))
		a, b := Analyze(ops), Analyze(ops)
		if a.Count() != b.Count() || a.Valid != b.Valid {
			t.Fatalf("two analyses differ: %d %v and %d %v", a.Count(), a.Valid, b.Count(), b.Valid)
		}
	})
}
