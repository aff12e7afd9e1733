package conformance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The compacted-read scenario (issue 6): a client reads a compacted topic
// whose cleaned log has emptied batches and emptied segments from its
// start to its end, and sees each key's latest value once.
//
// Setup writes compactedBatches, one produce request and one record batch
// each, with a producer without idempotence (producer id -1: no producer
// state keeps any emptied batch), to a topic of compactedConfigs. Batch i
// has CreateTime an hour ago plus i seconds, so that each batch rolls a
// new segment (segment.ms is 100ms, measured between record timestamps)
// and the active segment rolls within a second of the last append (by the
// server's age check): every batch is its own segment, and the cleaner
// may clean them all. segment.bytes (300; a three-record batch is 271
// bytes) bounds the groups the cleaner merges. Tombstones are removed by
// the first cleaning 1s after the one that first kept them
// (delete.retention.ms). Setup then polls the broker with raw Fetch
// requests until the log holds exactly the latest value of each live key
// once, no tombstone and no stale version: the cleaner ran, and ran again
// after the tombstones' delete horizon. Tombstoned keys are therefore
// absent from the expected map, not null.
//
// The runner reads partition 0 from the earliest offset until it gets the
// record at the log end offset minus one (the last batch holds a live
// key), within a time bound; it fails with "stalled at offset X" when the
// bound passes first, or with "looped" when an offset comes again or goes
// back. It prints the key→value map it saw on a `DATA ` line, which
// Verify compares with the expected map, and Verify reads the log again
// from the broker's side.

// compactedConfigs are the topic configs of compacted-read.
var compactedConfigs = map[string]string{
	"cleanup.policy":            "compact",
	"segment.bytes":             "300",
	"segment.ms":                "100",
	"min.cleanable.dirty.ratio": "0.01",
	"min.compaction.lag.ms":     "0",
	"delete.retention.ms":       "1000",
}

// compactedRecord is one record of compactedBatches; a nil Value is a
// tombstone.
type compactedRecord struct {
	Key   string
	Value *string
}

// compactedValue is the value of key in round r: "r<r>-<key>-" padded to
// 60 bytes.
func compactedValue(r int, key string) *string {
	v := fmt.Sprintf("r%d-%s-", r, key)
	v += strings.Repeat("x", 60-len(v))
	return &v
}

// compactedBatches are the batches compacted-read writes, in order. Keys
// k00..k11 are written in four batches of three per round; after the
// cleaning:
//   - rounds 1-4 (16 batches, 16 segments) are wholly superseded by round
//     5: a run of emptied batches and segments at the start of the log;
//   - round 6 rewrites k03, k06 and k09, leaving three round-5 batches
//     with gaps;
//   - k00..k02 are tombstoned in one batch, which empties round 5's first
//     batch; k01 comes back later, and the batch, with the tombstones of
//     k00 and k02 alone, is emptied once their delete horizon passes; so
//     is k10's tombstone batch. Each of the two lies between batches of
//     three live records (k12..k20, written once) that are too big to
//     share a segment with it (271 + 91 bytes > segment.bytes), so the
//     cleaning after the horizon empties a whole group of one segment:
//     an empty segment (or, on a broker that keeps it, a header-only
//     batch) between live ones, which a fetch must step over;
//   - the last batch but one writes k05 again, superseding round 5's;
//   - the last batch writes k21, once: the log's last offset is a live
//     record, where the runner stops. The segment holding a log's last
//     batch is never cleaned (as Kafka never cleans its active segment,
//     and Samsa's age roll leaves it the last non-empty one), so the
//     last batch has a key of its own for everything before it to be
//     compacted.
func compactedBatches() [][]compactedRecord {
	key := func(i int) string { return fmt.Sprintf("k%02d", i) }
	live := func(r int, keys ...int) []compactedRecord {
		var b []compactedRecord
		for _, i := range keys {
			b = append(b, compactedRecord{key(i), compactedValue(r, key(i))})
		}
		return b
	}
	var out [][]compactedRecord
	for r := 1; r <= 5; r++ {
		for g := range 4 {
			out = append(out, live(r, 3*g, 3*g+1, 3*g+2))
		}
	}
	return append(out,
		live(6, 3, 6, 9),
		live(7, 12, 13, 14),
		[]compactedRecord{{"k00", nil}, {"k01", nil}, {"k02", nil}},
		live(7, 15, 16, 17),
		[]compactedRecord{{"k10", nil}},
		live(7, 18, 19, 20),
		live(8, 1),
		live(9, 5),
		live(10, 21),
	)
}

// compactedExpected is the latest value of each key of compactedBatches
// whose latest record is not a tombstone.
func compactedExpected() map[string]string {
	m := map[string]string{}
	for _, b := range compactedBatches() {
		for _, r := range b {
			if r.Value == nil {
				delete(m, r.Key)
			} else {
				m[r.Key] = *r.Value
			}
		}
	}
	return m
}

// compactedRecords is the number of records compactedBatches writes: the
// log end offset after Setup.
func compactedRecords() int64 {
	n := 0
	for _, b := range compactedBatches() {
		n += len(b)
	}
	return int64(n)
}

func compactedScenario() Scenario {
	return Scenario{
		ID: "compacted-read",
		Title: fmt.Sprintf("read a compacted topic whose cleaner emptied batches and whole segments (%d batches of 22 keys, a segment each, "+
			"tombstones past their delete horizon) from its start to its end offset without looping or stalling; "+
			"the key→value map seen is each live key's latest value, once", len(compactedBatches())),
		Runner: "compacted-read", Needs: produceNeeds, Partitions: 1, Configs: compactedConfigs,
		Setup: setupCompacted, Verify: verifyCompacted,
	}
}

// setupCompacted writes compactedBatches and waits until the cleaner has
// compacted them (see the comment at the top of this file).
func setupCompacted(ctx context.Context, e *Env) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Addr), kgo.ManualFlushing(), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DefaultProduceTopic(e.Topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	ts := time.Now().Add(-time.Hour)
	for i, b := range compactedBatches() {
		// With manual flushing, the records buffered before Flush go
		// out as one batch.
		var firstErr error
		for _, r := range b {
			kr := &kgo.Record{Partition: 0, Key: []byte(r.Key), Timestamp: ts.Add(time.Duration(i) * time.Second)}
			if r.Value != nil {
				kr.Value = []byte(*r.Value)
			}
			cl.Produce(ctx, kr, func(_ *kgo.Record, err error) {
				if err != nil && firstErr == nil {
					firstErr = err
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("setup: flush batch %d: %w", i, err)
		}
		if firstErr != nil {
			return fmt.Errorf("setup: produce batch %d: %w", i, firstErr)
		}
	}
	want := compactedExpected()
	start := time.Now()
	last := "no fetch yet"
	for {
		st, err := readLog(ctx, e)
		switch {
		case err != nil:
			last = err.Error()
		case st.HighWatermark != compactedRecords():
			return fmt.Errorf("setup: high watermark %d after producing %d records", st.HighWatermark, compactedRecords())
		default:
			if err := st.matches(want); err == nil {
				e.logf("compacted in %v: %s; %s", time.Since(start).Round(time.Millisecond), st, segmentFiles(e))
				return nil
			} else {
				last = fmt.Sprintf("%v (%s)", err, st)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("setup: the log was not compacted within the setup time: %s; %s", last, segmentFiles(e))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// verifyCompacted compares the runner's DATA map with compactedExpected,
// then reads the log again from the broker's side.
func verifyCompacted(ctx context.Context, e *Env) error {
	want := compactedExpected()
	if err := compareReported(e.Reported, want); err != nil {
		return err
	}
	st, err := readLog(ctx, e)
	if err != nil {
		return err
	}
	if err := st.matches(want); err != nil {
		return fmt.Errorf("broker side, after the client read: %w (%s)", err, st)
	}
	return nil
}

// compareReported compares a compacted-read runner's DATA line,
// {"records": N, "values": {key: value or null}}, with want.
func compareReported(data string, want map[string]string) error {
	var got struct {
		Records *int               `json:"records"`
		Values  map[string]*string `json:"values"`
	}
	if data == "" {
		return errors.New("the runner reported no DATA line")
	}
	if err := json.Unmarshal([]byte(data), &got); err != nil || got.Records == nil || got.Values == nil {
		return fmt.Errorf("the runner's DATA line %q: want records and values (%v)", data, err)
	}
	var diffs []string
	for k, v := range got.Values {
		w, ok := want[k]
		switch {
		case v == nil && ok:
			diffs = append(diffs, fmt.Sprintf("%s: null, want %q", k, w))
		case v == nil:
			diffs = append(diffs, fmt.Sprintf("%s: null (a tombstone past its delete horizon, which the broker had removed)", k))
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: %q, want none (tombstoned)", k, *v))
		case *v != w:
			diffs = append(diffs, fmt.Sprintf("%s: %q, want %q", k, *v, w))
		}
	}
	for k, w := range want {
		if _, ok := got.Values[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing, want %q", k, w))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		return fmt.Errorf("the client's key→value map differs: %s", strings.Join(diffs, "; "))
	}
	if *got.Records != len(want) {
		return fmt.Errorf("the client delivered %d records for %d keys: the log holds one record a key", *got.Records, len(want))
	}
	return nil
}

func (e *Env) logf(format string, args ...any) {
	if e.Logf != nil {
		e.Logf(format, args...)
	}
}

// logRecord is one record read back with a raw fetch.
type logRecord struct {
	Offset int64
	Key    string
	Value  *string // nil for a tombstone
}

// logState is partition 0 of a topic as raw fetches from its log start
// offset return it.
type logState struct {
	HighWatermark, LogStartOffset int64
	Batches                       int // batches returned
	EmptyBatches                  int // of which header-only (no record)
	Records                       []logRecord
}

func (s logState) String() string {
	return fmt.Sprintf("log start %d, high watermark %d, %d records in %d batches of which %d header-only",
		s.LogStartOffset, s.HighWatermark, len(s.Records), s.Batches, s.EmptyBatches)
}

// matches checks that the log holds exactly one record per key of want,
// with its value.
func (s logState) matches(want map[string]string) error {
	seen := map[string]bool{}
	for _, r := range s.Records {
		w, ok := want[r.Key]
		switch {
		case r.Value == nil:
			return fmt.Errorf("tombstone of %s at offset %d still in the log", r.Key, r.Offset)
		case !ok:
			return fmt.Errorf("record of tombstoned key %s at offset %d still in the log", r.Key, r.Offset)
		case *r.Value != w:
			return fmt.Errorf("superseded record %s=%.6s… at offset %d still in the log", r.Key, *r.Value, r.Offset)
		case seen[r.Key]:
			return fmt.Errorf("key %s twice in the log (offset %d)", r.Key, r.Offset)
		}
		seen[r.Key] = true
	}
	if len(seen) != len(want) {
		return fmt.Errorf("%d of %d live keys in the log", len(seen), len(want))
	}
	return nil
}

// readLog reads partition 0 of e.Topic with raw Fetch requests, from its
// log start offset to its high watermark. A fetch that returns no batch
// below the high watermark is an error: the broker would stall a
// consumer there.
func readLog(ctx context.Context, e *Env) (logState, error) {
	var st logState
	td, err := e.Admin.ListTopics(ctx, e.Topic)
	if err != nil {
		return st, fmt.Errorf("broker side: metadata: %w", err)
	}
	id := td[e.Topic].ID
	next := int64(-1)
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 100
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = e.Topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = 0
		rp.FetchOffset = max(next, 0)
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, e.Client)
		if err != nil {
			return st, fmt.Errorf("broker side: fetch at %d: %w", rp.FetchOffset, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return st, errors.New("broker side: fetch response without the partition")
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			return st, fmt.Errorf("broker side: fetch at %d: error code %d", rp.FetchOffset, p.ErrorCode)
		}
		st.HighWatermark, st.LogStartOffset = p.HighWatermark, p.LogStartOffset
		if next < 0 {
			next = p.LogStartOffset
			if next > 0 {
				continue // fetch again from the log start
			}
		}
		if next >= p.HighWatermark {
			return st, nil
		}
		batches := 0
		for raw := p.RecordBatches; len(raw) >= 12; {
			var b kmsg.RecordBatch
			if err := b.ReadFrom(raw); err != nil {
				break // a partial batch at the end of the response
			}
			n := 12 + int(b.Length)
			if n > len(raw) {
				break
			}
			raw = raw[n:]
			last := b.FirstOffset + int64(b.LastOffsetDelta)
			if last < next {
				continue // before the fetch offset
			}
			batches++
			st.Batches++
			if b.NumRecords == 0 {
				st.EmptyBatches++
			}
			if b.Attributes&0x20 != 0 {
				next = last + 1
				continue // a control batch
			}
			if b.Attributes&7 != 0 {
				return st, fmt.Errorf("broker side: batch at %d is compressed (codec %d); compacted-read produces none", b.FirstOffset, b.Attributes&7)
			}
			recs, err := decodeRecords(b)
			if err != nil {
				return st, fmt.Errorf("broker side: batch at %d: %w", b.FirstOffset, err)
			}
			for _, r := range recs {
				if r.Offset >= next {
					st.Records = append(st.Records, r)
				}
			}
			next = last + 1
		}
		if batches == 0 {
			return st, fmt.Errorf("broker side: a fetch at offset %d, below the high watermark %d, returned no batch (%d bytes): a consumer would stall there", rp.FetchOffset, p.HighWatermark, len(p.RecordBatches))
		}
	}
}

// decodeRecords decodes the records of an uncompressed batch.
func decodeRecords(b kmsg.RecordBatch) ([]logRecord, error) {
	var out []logRecord
	raw := b.Records
	for i := range int(b.NumRecords) {
		l, n := binary.Varint(raw)
		if n <= 0 || l < 0 || int64(len(raw)-n) < l {
			return nil, fmt.Errorf("record %d of %d: bad length", i, b.NumRecords)
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:n+int(l)]); err != nil {
			return nil, fmt.Errorf("record %d of %d: %w", i, b.NumRecords, err)
		}
		raw = raw[n+int(l):]
		lr := logRecord{Offset: b.FirstOffset + int64(r.OffsetDelta), Key: string(r.Key)}
		if r.Value != nil {
			v := string(r.Value)
			lr.Value = &v
		}
		out = append(out, lr)
	}
	return out, nil
}

// segmentFiles describes the .log files of e.Topic's partition 0 in the
// server's log dir: how many, and how many are empty.
func segmentFiles(e *Env) string {
	if e.Dir == "" {
		return "segments not listed"
	}
	paths, err := filepath.Glob(filepath.Join(e.Dir, e.Topic+"-0", "*.log"))
	if err != nil || len(paths) == 0 {
		return fmt.Sprintf("no segment file found in %s (%v)", e.Dir, err)
	}
	empty := 0
	var sizes []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue // removed meanwhile
		}
		if fi.Size() == 0 {
			empty++
		}
		sizes = append(sizes, fmt.Sprint(fi.Size()))
	}
	return fmt.Sprintf("%d segment files, %d empty (sizes %s)", len(paths), empty, strings.Join(sizes, " "))
}
