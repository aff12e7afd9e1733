package console

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/dlq"
)

// Header is a record header, decoded as the record's key and value are.
type Header struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Message is a record as the console shows it.
type Message struct {
	Partition int32       `json:"partition"`
	Offset    int64       `json:"offset"`
	Timestamp int64       `json:"timestamp"` // unix millis
	Key       *string     `json:"key"`       // nil: a null key
	Value     *string     `json:"value"`     // nil: a null value (tombstone)
	Headers   []Header    `json:"headers"`
	DLT       *DeadLetter `json:"deadLetter,omitempty"`
	// KeyEnc and ValueEnc are "hex" when the key or value is not valid
	// UTF-8 and enc was utf8 or json: it is then shown as hex, as headers
	// are, rather than with U+FFFD in place of its bytes; else empty.
	KeyEnc   string `json:"keyEncoding,omitempty"`
	ValueEnc string `json:"valueEncoding,omitempty"`
}

// Time is Timestamp as a time, for templates.
func (m Message) Time() time.Time { return time.UnixMilli(m.Timestamp).UTC() }

// Encodings the console decodes keys and values with.
var encodings = []string{"utf8", "json", "hex", "base64"}

// decode renders b in enc: utf8 (invalid bytes as U+FFFD), json (indented
// when b is JSON, else utf8), hex or base64.
func decode(b []byte, enc string) *string {
	if b == nil {
		return nil
	}
	var s string
	switch enc {
	case "hex":
		s = hex.EncodeToString(b)
	case "base64":
		s = base64.StdEncoding.EncodeToString(b)
	case "json":
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") == nil {
			s = buf.String()
		} else {
			s = strings.ToValidUTF8(string(b), "\uFFFD")
		}
	default:
		s = strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return &s
}

// decodeOrHex is decode, but bytes that are not valid UTF-8 asked for as
// utf8 or json come back as hex, with "hex" as the encoding used.
func decodeOrHex(b []byte, enc string) (*string, string) {
	if (enc == "utf8" || enc == "json") && !utf8.Valid(b) {
		return decode(b, "hex"), "hex"
	}
	return decode(b, enc), ""
}

func message(r *kgo.Record, enc string) Message {
	m := Message{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Headers: []Header{}}
	m.Key, m.KeyEnc = decodeOrHex(r.Key, enc)
	m.Value, m.ValueEnc = decodeOrHex(r.Value, enc)
	for _, h := range r.Headers {
		v := decode(h.Value, enc)
		if v == nil || (enc == "json" || enc == "utf8") && !utf8.Valid(h.Value) {
			v = decode(h.Value, "hex")
		}
		hv := ""
		if v != nil {
			hv = *v
		}
		m.Headers = append(m.Headers, Header{h.Key, hv})
	}
	m.DLT = deadLetter(r.Headers)
	return m
}

// Start is where a browse starts: Mode "beginning", "end" (the last Limit
// records), "offset" (Offset) or "timestamp" (the first record at or after
// Millis).
type Start struct {
	Mode   string
	Offset int64
	Millis int64
}

// Browse is /api/topics/{topic}/messages.
type Browse struct {
	Topic      string    `json:"topic"`
	Partition  int32     `json:"partition"`
	Messages   []Message `json:"messages"`
	NextOffset int64     `json:"nextOffset"` // where to continue (live tail)
	End        int64     `json:"logEndOffset"`
	Start      int64     `json:"logStartOffset"`
}

// maxShownBytes bounds the keys, values and headers of the records one
// browse or search returns (at least one record): limit 1,000 of 1 MiB
// records would hold a GiB in the node, twice that as hex. The answer's
// next offset (or a scan's progress) continues after the last one shown.
const maxShownBytes = 8 << 20

func recordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// browse reads up to limit records of one partition from start, stopping at
// the partition's end offset as it was when asked (never waiting for new
// records).
func (c *Console) browse(ctx context.Context, s *session, topic string, partition int32, start Start, limit int, enc string) (Browse, error) {
	b := Browse{Topic: topic, Partition: partition, Messages: []Message{}}
	adm := kadm.NewClient(s.cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return b, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return b, err
	}
	so, ok1 := starts.Lookup(topic, partition)
	eo, ok2 := ends.Lookup(topic, partition)
	if !ok1 || !ok2 {
		return b, fmt.Errorf("%w: no partition %d of topic %q", errNotFound, partition, topic)
	}
	if so.Err != nil {
		return b, so.Err
	}
	if eo.Err != nil {
		return b, eo.Err
	}
	b.Start, b.End = so.Offset, eo.Offset
	from := so.Offset
	switch start.Mode {
	case "end":
		from = max(so.Offset, eo.Offset-int64(limit))
	case "offset":
		from = min(max(start.Offset, so.Offset), eo.Offset)
	case "timestamp":
		after, err := adm.ListOffsetsAfterMilli(ctx, start.Millis, topic)
		if err != nil {
			return b, err
		}
		from = eo.Offset
		if a, ok := after.Lookup(topic, partition); ok && a.Err == nil && a.Offset >= 0 {
			from = a.Offset
		}
	}
	b.NextOffset = from
	if from >= eo.Offset {
		return b, nil
	}
	shown := 0
	err = c.consume(ctx, s, topic, map[int32]int64{partition: from}, map[int32]int64{partition: eo.Offset}, func(r *kgo.Record) bool {
		b.Messages = append(b.Messages, message(r, enc))
		b.NextOffset = r.Offset + 1
		shown += recordBytes(r)
		return len(b.Messages) < limit && shown < maxShownBytes
	})
	return b, err
}

// Filter selects records in a search. Empty fields match every record.
type Filter struct {
	KeyContains   string
	ValueContains string
	JSONField     string // a top-level field, or a dotted path
	JSONEquals    string // compared with the field's JSON text, or its string value
	FromMillis    int64  // timestamps in [FromMillis, ToMillis); 0 unbounded
	ToMillis      int64
}

func (f Filter) match(r *kgo.Record) bool {
	if f.KeyContains != "" && !bytes.Contains(r.Key, []byte(f.KeyContains)) {
		return false
	}
	if f.ValueContains != "" && !bytes.Contains(r.Value, []byte(f.ValueContains)) {
		return false
	}
	ts := r.Timestamp.UnixMilli()
	if f.FromMillis != 0 && ts < f.FromMillis || f.ToMillis != 0 && ts >= f.ToMillis {
		return false
	}
	if f.JSONField != "" {
		var v any
		if json.Unmarshal(r.Value, &v) != nil {
			return false
		}
		for _, k := range strings.Split(f.JSONField, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				return false
			}
			if v, ok = m[k]; !ok {
				return false
			}
		}
		if s, ok := v.(string); ok {
			return s == f.JSONEquals
		}
		j, _ := json.Marshal(v)
		return string(j) == f.JSONEquals
	}
	return true
}

// Scan is /api/topics/{topic}/search: the matches and how far the scan
// got in each partition.
type Scan struct {
	Topic    string          `json:"topic"`
	Messages []Message       `json:"messages"`
	Scanned  int64           `json:"scanned"` // records read
	Progress []ScanPartition `json:"progress"`
	Done     bool            `json:"done"` // every partition read to its end offset
	Elapsed  float64         `json:"elapsedSeconds"`
}

// ScanPartition is how far a scan got in a partition: Next is the first
// offset not read, End the end offset when the scan began.
type ScanPartition struct {
	Partition int32 `json:"partition"`
	Next      int64 `json:"next"`
	End       int64 `json:"end"`
}

// Continue is the start parameter that continues the scan.
func (s Scan) Continue() string {
	var parts []string
	for _, p := range s.Progress {
		parts = append(parts, fmt.Sprintf("%d:%d", p.Partition, p.Next))
	}
	return strings.Join(parts, ",")
}

// search scans topic's partitions (all when partition < 0) from from (the
// log start offsets where absent) to their end offsets, keeping up to limit
// matches, reading at most budget records for at most budgetTime.
func (c *Console) search(ctx context.Context, s *session, topic string, partition int32, from map[int32]int64, f Filter, limit int, budget int64, budgetTime time.Duration, enc string) (Scan, error) {
	began := time.Now()
	sc := Scan{Topic: topic, Messages: []Message{}}
	adm := kadm.NewClient(s.cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return sc, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return sc, err
	}
	next, until := map[int32]int64{}, map[int32]int64{}
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil || partition >= 0 && e.Partition != partition {
			return
		}
		st, _ := starts.Lookup(topic, e.Partition)
		next[e.Partition] = st.Offset
		if o, ok := from[e.Partition]; ok {
			next[e.Partition] = max(o, st.Offset)
		}
		until[e.Partition] = e.Offset
	})
	if len(until) == 0 {
		return sc, fmt.Errorf("topic %q has no such partition", topic)
	}
	sctx, cancel := context.WithTimeout(ctx, budgetTime)
	defer cancel()
	start := map[int32]int64{}
	for p, o := range next {
		start[p] = o
	}
	shown := 0
	err = c.consume(sctx, s, topic, start, until, func(r *kgo.Record) bool {
		sc.Scanned++
		next[r.Partition] = r.Offset + 1
		if f.match(r) {
			sc.Messages = append(sc.Messages, message(r, enc))
			shown += recordBytes(r)
		}
		return sc.Scanned < budget && len(sc.Messages) < limit && shown < maxShownBytes
	})
	sc.Done = true
	for p, e := range until {
		if next[p] < e {
			sc.Done = false
		}
		sc.Progress = append(sc.Progress, ScanPartition{Partition: p, Next: next[p], End: e})
	}
	sortBy(sc.Progress, func(p ScanPartition) int32 { return p.Partition })
	sc.Elapsed = time.Since(began).Seconds()
	return sc, err
}

// parseStarts parses "p:o,p:o".
func parseStarts(s string) (map[int32]int64, error) {
	out := map[int32]int64{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		p, o, ok := strings.Cut(part, ":")
		pi, err1 := strconv.ParseInt(p, 10, 32)
		oi, err2 := strconv.ParseInt(o, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad start %q (partition:offset,...)", part)
		}
		out[int32(pi)] = oi
	}
	return out, nil
}

// produce writes one record; partition < 0 lets the default partitioner
// choose.
func (c *Console) produce(ctx context.Context, s *session, topic string, partition int32, key, value *string, headers []Header) (*kgo.Record, error) {
	r := &kgo.Record{Topic: topic}
	if key != nil {
		r.Key = []byte(*key)
	}
	if value != nil {
		r.Value = []byte(*value)
	}
	for _, h := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
	}
	if partition >= 0 {
		r.Partition = partition
		ctx = withPartition(ctx)
	}
	return r, s.cl.ProduceSync(ctx, r).FirstErr()
}

// DeadLetter is where a dead-letter record came from and why, from its
// headers (internal/dlq: KIP-1191 __dlq.errors.* or Spring's kafka_dlt-*).
type DeadLetter struct {
	Format        string `json:"format"` // kip-1191 or spring
	Topic         string `json:"originalTopic"`
	Partition     int32  `json:"originalPartition"`
	Offset        int64  `json:"originalOffset"`
	Group         string `json:"group,omitempty"`
	DeliveryCount int    `json:"deliveryCount"` // -1 unknown
	Exception     string `json:"exceptionFqcn,omitempty"`
	Message       string `json:"reason,omitempty"`
	Error         string `json:"error,omitempty"` // a malformed header
}

// deadLetter decodes the failure headers; nil for a record without them.
func deadLetter(hs []kgo.RecordHeader) *DeadLetter {
	o, err := dlq.Decode(hs)
	if errors.Is(err, dlq.ErrNotDeadLetter) {
		return nil
	}
	d := &DeadLetter{Format: string(o.Format), Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Group: o.Group,
		DeliveryCount: o.DeliveryCount, Exception: o.Exception, Message: o.Reason}
	if err != nil {
		d.Error = err.Error()
	}
	return d
}

// isDLT says whether a topic's name marks it as a dead-letter topic.
func isDLT(name string) bool {
	for _, suf := range []string{".DLT", "-dlt", ".dlq", "-dlq"} {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	return false
}

// replay reads the records at offsets of a dead-letter topic's partition
// and produces each back to its source partition with its key, value and
// headers but the dead-letter ones (dlq.Replay); it returns how many it
// replayed. Nothing is produced when a selected record is not a dead
// letter or an offset is missing.
func (c *Console) replay(ctx context.Context, s *session, topic string, partition int32, offsets []int64) (int, error) {
	want := map[int64]bool{}
	lo, hi := int64(-1), int64(-1)
	for _, o := range offsets {
		want[o] = true
		if lo < 0 || o < lo {
			lo = o
		}
		hi = max(hi, o)
	}
	if len(want) == 0 {
		return 0, errors.New("no records selected")
	}
	var recs []*kgo.Record
	err := c.consume(ctx, s, topic, map[int32]int64{partition: lo}, map[int32]int64{partition: hi + 1}, func(r *kgo.Record) bool {
		if want[r.Offset] {
			recs = append(recs, r)
		}
		return len(recs) < len(want)
	})
	if err != nil {
		return 0, err
	}
	if len(recs) != len(want) {
		return 0, fmt.Errorf("%w: found %d of the %d selected offsets of %s[%d]", errBadRequest, len(recs), len(want), topic, partition)
	}
	for _, r := range recs {
		if _, _, err := dlq.Restore(r); err != nil { // a malformed dead letter: the request's fault, not the cluster's
			return 0, fmt.Errorf("%w: %s[%d]@%d: %v", errBadRequest, r.Topic, r.Partition, r.Offset, err)
		}
	}
	return dlq.Replay(withPartition(ctx), s.cl, recs)
}
