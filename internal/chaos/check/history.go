// Package check is the checker of Samsa's fault harness: a history of
// client operations against a Kafka-compatible cluster (the queue workload
// of Jepsen's Kafka tests: sends, polls and transactions on a few
// partitions), written as JSON lines, and the analyses that find what the
// walkthrough promises never happens under faults: lost, duplicated or
// reordered writes, inconsistent offsets, aborted or uncommitted reads,
// decreasing high-watermarks and G1c cycles between transactions.
//
// History format: one JSON object per line, an Op. Every operation a
// client starts is an "invoke" Op; its completion is a later Op of the same
// process and function with type "ok" (it happened), "fail" (it certainly
// did not happen) or "info" (unknown: a timeout, a lost connection). A
// process runs one operation at a time. Values are unique across the
// history (the workload numbers them), so a value names its send.
package check

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Op types.
const (
	Invoke = "invoke" // an operation starts
	OK     = "ok"     // it completed and took effect
	Fail   = "fail"   // it completed and certainly took no effect
	Info   = "info"   // its outcome is unknown
)

// Op functions.
const (
	FSend = "send" // mops are sends (a non-transactional produce)
	FPoll = "poll" // mops are polls (records a consumer read)
	FTxn  = "txn"  // sends and polls committed or aborted together
	FHW   = "hw"   // mops carry high-watermarks a consumer was served
)

// Op is one line of a history.
type Op struct {
	Index   int    `json:"index"`   // position in the history, from 0
	Type    string `json:"type"`    // Invoke, OK, Fail or Info
	Process int    `json:"process"` // the client; one operation at a time
	Time    int64  `json:"time"`    // nanoseconds since the history began
	F       string `json:"f"`       // FSend, FPoll, FTxn or FHW
	// ReadCommitted tells a consumer's isolation level (polls, txns).
	ReadCommitted bool `json:"read_committed,omitempty"`
	// CommitTime (txn completions) is when EndTxn(commit) was invoked,
	// nanoseconds since the history began; 0 when it never was.
	CommitTime int64 `json:"commit_time,omitempty"`
	// Mops are the operation's micro-operations: in an invocation the
	// sends intended, in a completion what happened (offsets known).
	Mops []Mop `json:"mops,omitempty"`
	// Error describes a Fail or Info completion.
	Error string `json:"error,omitempty"`
}

// Mop is one send, one polled record or one high-watermark observation.
type Mop struct {
	F         string `json:"f"`         // FSend, FPoll or FHW
	Partition int32  `json:"partition"` // the key: one partition of the workload's topic
	Value     int64  `json:"value"`     // the record's value (unique); -1 for FHW
	Offset    int64  `json:"offset"`    // the record's offset, or the high-watermark; -1 unknown
}

// Recorder appends Ops to a history as JSON lines. Safe for concurrent
// use.
type Recorder struct {
	mu    sync.Mutex // guards the fields below
	w     *bufio.Writer
	enc   *json.Encoder
	n     int
	start time.Time
	err   error
}

// NewRecorder writes a history to w; times count from now.
func NewRecorder(w io.Writer) *Recorder {
	bw := bufio.NewWriter(w)
	return &Recorder{w: bw, enc: json.NewEncoder(bw), start: time.Now()}
}

// Record sets op's Index and Time, writes it and returns it.
func (r *Recorder) Record(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = r.n
	op.Time = time.Since(r.start).Nanoseconds()
	r.n++
	if err := r.enc.Encode(op); err != nil && r.err == nil {
		r.err = err
	}
	return op
}

// Since is the history's time now, in nanoseconds.
func (r *Recorder) Since() int64 { return time.Since(r.start).Nanoseconds() }

// Flush writes what is buffered and returns the first error met.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.w.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	return r.err
}

// Read parses a history of JSON lines.
func Read(rd io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(rd)
	for {
		var op Op
		err := dec.Decode(&op)
		if err == io.EOF {
			return ops, nil
		}
		if err != nil {
			return ops, fmt.Errorf("history op %d: %w", len(ops), err)
		}
		ops = append(ops, op)
	}
}
