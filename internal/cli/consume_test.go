package cli

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseFormat(t *testing.T) {
	rec := &kgo.Record{
		Topic:     "t",
		Partition: 4,
		Offset:    1234,
		Key:       []byte("k"),
		Value:     []byte("value"),
		Timestamp: time.UnixMilli(1700000000123),
		Headers:   []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}},
	}
	nullKey := *rec
	nullKey.Key, nullKey.Value = nil, []byte{}
	for _, tc := range []struct {
		format string
		rec    *kgo.Record
		want   string
		err    string
	}{
		{`%v\n`, rec, "value\n", ""},
		{`%s`, rec, "value", ""},
		{`%k %v %p %o %T %h %t`, rec, "k value 4 1234 1700000000123 a=1,b= t", ""},
		{`%K/%V/%S`, rec, "1/5/5", ""},
		{`[%k]%K %S`, &nullKey, "[]-1 0", ""},
		{`100%% \t\r\\\0.`, rec, "100% \t\r\\\x00.", ""},
		{`plain`, rec, "plain", ""},
		{``, rec, "", ""},
		{`%x`, rec, "", "unknown verb %x"},
		{`\q`, rec, "", `unknown escape \q`},
		{`abc%`, rec, "", "lone %"},
		{`abc\`, rec, "", `lone \`},
	} {
		f, err := parseFormat(tc.format)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseFormat(%q): err %v, want %q", tc.format, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseFormat(%q): %v", tc.format, err)
			continue
		}
		if got := string(f.appendRecord(nil, tc.rec)); got != tc.want {
			t.Errorf("format %q: %q, want %q", tc.format, got, tc.want)
		}
	}
}

func TestProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		p := startProgress(&out, "produce", "acked", time.Second, false)
		p.add(10, 2_000_000)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		p.add(10, 2_000_000)
		p.fail()
		time.Sleep(time.Second)
		synctest.Wait()
		p.finish(false)
		want := "samsa produce: 10 records acked, 2.0 MB in 1s, 2.00 MB/s\n" +
			"samsa produce: 20 records acked, 4.0 MB in 2s, 2.00 MB/s, 1 failed\n" +
			"samsa produce: done: 20 records acked, 4.0 MB in 2.5s, 1.60 MB/s, 1 failed\n"
		if out.String() != want {
			t.Errorf("progress:\n%s\nwant:\n%s", out.String(), want)
		}

		out.Reset()
		p = startProgress(&out, "consume", "consumed", time.Second, true)
		p.add(1, 1)
		time.Sleep(3 * time.Second)
		p.finish(true)
		if out.Len() != 0 {
			t.Errorf("quiet progress wrote %q", out.String())
		}
	})
}

// lines joins strings as lines, each ended by "\n".
func lines(s ...string) string {
	if len(s) == 0 {
		return ""
	}
	return strings.Join(s, "\n") + "\n"
}

func TestProduceConsumeOptions(t *testing.T) { eachBackend(t, testProduceConsumeOptions) }

func testProduceConsumeOptions(t *testing.T, addr string) {
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "kv", b, "-p", "2")
	mustRun(t, strings.NewReader("alpha:one\nbeta:two:2\n:empty key\n"), "produce", "kv", b,
		"--key-separator", ":", "--header", "src=test", "--header", "n=", "-q")
	r := mustRun(t, nil, "consume", "kv", b, "--from-beginning", "--until-end", "-q",
		"--format", `%p %k|%v|%h|%K|%S\n`)
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := map[string]bool{
		"alpha|one|src=test,n=|5|3":  true,
		"beta|two:2|src=test,n=|4|5": true,
		"|empty key|src=test,n=|0|9": true,
	}
	if len(got) != len(want) {
		t.Fatalf("consumed %q, want %d records", got, len(want))
	}
	for _, l := range got {
		p, rest, _ := strings.Cut(l, " ")
		if !want[rest] {
			t.Errorf("unexpected record %q", l)
		}
		key, _, _ := strings.Cut(rest, "|")
		if wantP := javaPartition([]byte(key), 2); p != string('0'+rune(wantP)) {
			t.Errorf("key %q in partition %s, want %d", key, p, wantP)
		}
	}

	// --partition sends everything to one partition; no key means a null
	// key, whose length prints as -1.
	mustRun(t, nil, "topic", "create", "one", b, "-p", "3")
	mustRun(t, strings.NewReader("x\ny\n\nz"), "produce", "one", b, "--partition", "2", "-q", "--acks", "1", "--linger", "0s")
	r = mustRun(t, nil, "consume", "one", b, "--from-beginning", "--until-end", "-q", "--format", `%p %o %K [%v]\n`)
	if w := lines("2 0 -1 [x]", "2 1 -1 [y]", "2 2 -1 []", "2 3 -1 [z]"); r.stdout != w {
		t.Errorf("consume after --partition 2: %q, want %q", r.stdout, w)
	}
}

func TestProduceCompressionAndAcks(t *testing.T) { eachBackend(t, testProduceCompressionAndAcks) }

func testProduceCompressionAndAcks(t *testing.T, addr string) {
	b := "--brokers=" + addr
	var in strings.Builder
	for i := range 2000 {
		in.WriteString(strings.Repeat("abc", i%50) + "\n")
	}
	for _, args := range [][]string{
		{"--compression", "none"},
		{"--compression", "gzip"},
		{"--compression", "snappy"},
		{"--compression", "lz4"},
		{"--compression", "zstd"},
		{"--acks", "1"},
		{"--acks", "0"},
	} {
		t.Run(strings.Join(args, "="), func(t *testing.T) {
			topic := "c-" + args[1]
			mustRun(t, nil, "topic", "create", topic, b, "-p", "1")
			mustRun(t, strings.NewReader(in.String()), append([]string{"produce", topic, b, "-q"}, args...)...)
			stop := "--until-end"
			if args[1] == "0" {
				// With acks=0 produce returns before the broker has
				// appended: wait for the records instead of reading
				// the end offsets at once.
				stop = "--max-messages=2000"
			}
			r := mustRun(t, nil, "consume", topic, b, "--from-beginning", stop, "-q")
			if r.stdout != in.String() {
				t.Errorf("round trip with %v: %d bytes back, want %d", args, len(r.stdout), in.Len())
			}
		})
	}
}

func TestConsumeStartAndStop(t *testing.T) { eachBackend(t, testConsumeStartAndStop) }

func testConsumeStartAndStop(t *testing.T, addr string) {
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "empty", b, "-p", "3")
	mustRun(t, nil, "topic", "create", "ten", b, "-p", "1")
	mustRun(t, strings.NewReader(lines("0", "1", "2", "3", "4", "5", "6", "7", "8", "9")), "produce", "ten", b, "-q")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"empty topic", []string{"empty", "--from-beginning", "--until-end"}, ""},
		{"empty partition", []string{"empty", "--partition", "1", "--until-end"}, ""},
		{"latest until end", []string{"ten", "--until-end"}, ""},
		{"from beginning", []string{"ten", "--from-beginning", "--until-end"}, lines("0", "1", "2", "3", "4", "5", "6", "7", "8", "9")},
		{"offset", []string{"ten", "--offset", "7", "--until-end"}, lines("7", "8", "9")},
		{"offset past the end", []string{"ten", "--offset", "100", "--until-end"}, ""},
		{"relative offset", []string{"ten", "--offset", "-2", "--until-end"}, lines("8", "9")},
		{"relative offset before the start", []string{"ten", "--offset", "-50", "-e"}, lines("0", "1", "2", "3", "4", "5", "6", "7", "8", "9")},
		{"max messages", []string{"ten", "--from-beginning", "--max-messages", "3"}, lines("0", "1", "2")},
		{"max messages with offset", []string{"ten", "-o", "5", "-n", "2", "--format", `%o:%v\n`}, lines("5:5", "6:6")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRun(t, nil, append([]string{"consume", "-q", b}, tc.args...)...)
			if r.stdout != tc.want {
				t.Errorf("consume %v: %q, want %q", tc.args, r.stdout, tc.want)
			}
		})
	}
}

// TestConsumeGroup runs against kfake only: Samsa has no group
// coordinator yet.
func TestConsumeGroup(t *testing.T) {
	addr := startFake(t)
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "g", b, "-p", "1")
	mustRun(t, strings.NewReader(lines("0", "1", "2", "3", "4", "5")), "produce", "g", b, "-q")

	r := mustRun(t, nil, "consume", "g", b, "-q", "--group", "readers", "--from-beginning", "--until-end", "--max-messages", "4")
	if w := lines("0", "1", "2", "3"); r.stdout != w {
		t.Fatalf("first read: %q, want %q", r.stdout, w)
	}
	// The group resumes at its committed offset, not at the beginning.
	r = mustRun(t, nil, "consume", "g", b, "-q", "--group", "readers", "--from-beginning", "--until-end")
	if w := lines("4", "5"); r.stdout != w {
		t.Fatalf("second read: %q, want %q", r.stdout, w)
	}
	r = mustRun(t, nil, "consume", "g", b, "-q", "--group", "readers", "--until-end")
	if r.stdout != "" {
		t.Fatalf("third read: %q, want nothing", r.stdout)
	}
	// A new group without --from-beginning starts at the end.
	r = mustRun(t, nil, "consume", "g", b, "-q", "--group", "late", "--until-end")
	if r.stdout != "" {
		t.Fatalf("new group at the end: %q, want nothing", r.stdout)
	}
}

// TestConsumeReadCommitted checks --isolation and that --until-end stops
// when a partition ends with a transaction marker, which a consumer never
// sees as a record. It runs against kfake only: Samsa has no transaction
// coordinator yet.
func TestConsumeReadCommitted(t *testing.T) {
	addr := startFake(t)
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "txn", b, "-p", "1")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("cli-test"), kgo.DefaultProduceTopic("txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	txn := func(commit kgo.TransactionEndTry, values ...string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	txn(kgo.TryCommit, "c1", "c2")
	mustRun(t, strings.NewReader("p1\n"), "produce", "txn", b, "-q")
	txn(kgo.TryAbort, "a1")

	r := mustRun(t, nil, "consume", "txn", b, "-q", "--from-beginning", "--until-end", "--isolation", "read_committed", "--format", `%o:%v\n`)
	if w := lines("0:c1", "1:c2", "3:p1"); r.stdout != w {
		t.Errorf("read_committed: %q, want %q", r.stdout, w)
	}
	r = mustRun(t, nil, "consume", "txn", b, "-q", "--from-beginning", "--until-end", "--format", `%o:%v\n`)
	if w := lines("0:c1", "1:c2", "3:p1", "4:a1"); r.stdout != w {
		t.Errorf("read_uncommitted: %q, want %q", r.stdout, w)
	}
}

// notifyWriter is a concurrency-safe buffer that closes ready once it holds
// want newlines.
type notifyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	want  int
	ready chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if bytes.Count(w.buf.Bytes(), []byte("\n")) >= w.want {
		select {
		case <-w.ready:
		default:
			close(w.ready)
		}
	}
	return len(p), nil
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestConsumeFollowAndInterrupt runs consume without --until-end: it
// prints records produced after it started and stops cleanly, committing
// its group's offsets, when interrupted. It runs against kfake only: Samsa
// has no group coordinator yet.
func TestConsumeFollowAndInterrupt(t *testing.T) {
	addr := startFake(t)
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "live", b, "-p", "2")
	mustRun(t, strings.NewReader(lines("old")), "produce", "live", b, "-q")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &notifyWriter{want: 3, ready: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		root := newRoot()
		root.SetArgs([]string{"consume", "live", b, "-q", "--group", "followers"})
		root.SetIn(strings.NewReader(""))
		root.SetOut(out)
		root.SetErr(new(bytes.Buffer))
		done <- root.ExecuteContext(ctx)
	}()
	// The consumer starts at the end: keep producing until it has printed
	// three records, since records produced before it joined are skipped.
	timeout := time.After(time.Minute)
	produced := 0
	for {
		mustRun(t, strings.NewReader(fmt.Sprintf("new%d\n", produced)), "produce", "live", b, "-q")
		produced++
		select {
		case <-out.ready:
		case <-timeout:
			t.Fatalf("consume printed only %q", out.String())
		case err := <-done:
			t.Fatalf("consume stopped early: %v", err)
		default:
			continue
		}
		break
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("interrupted consume: %v", err)
	}
	printed := strings.Fields(out.String())
	if len(printed) < 3 || slices.Contains(printed, "old") {
		t.Errorf("consume printed %q", printed)
	}
	// The offsets of the printed records were committed: the group
	// resumes after them, and between the two runs every record from
	// the first printed one on was printed exactly once.
	r := mustRun(t, nil, "consume", "live", b, "-q", "--group", "followers", "--until-end")
	all := append(printed, strings.Fields(r.stdout)...)
	first, err := strconv.Atoi(strings.TrimPrefix(printed[0], "new"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := first; i < produced; i++ {
		want = append(want, fmt.Sprintf("new%d", i))
	}
	slices.Sort(all)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Errorf("records printed by the two runs: %q, want %q", all, want)
	}
}

func TestClientErrors(t *testing.T) { eachBackend(t, testClientErrors) }

func testClientErrors(t *testing.T, addr string) {
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "two", b, "-p", "2")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  []string // substrings of the error
	}{
		{"consume unknown topic", "", []string{"consume", "nope", "-e"}, []string{"UNKNOWN_TOPIC_OR_PARTITION"}},
		{"consume unknown partition", "", []string{"consume", "two", "-e", "--partition", "7"}, []string{"no partition 7"}},
		// A missing topic is created (auto.create.topics.enable); one that
		// cannot exist fails its records.
		{"produce invalid topic", "a\n", []string{"produce", "bad/name"}, []string{"1 of 1 records failed"}},
		{"produce unknown partition", "a\nb\n", []string{"produce", "two", "--partition", "5"}, []string{"2 of 2 records failed"}},
		{"bad json", "{\"k\":\"1\"}\nnot json\n", []string{"produce", "two", "--key-field", "k"}, []string{"line 2", "--key-field k"}},
		{"no separator", "a:1\nb\n", []string{"produce", "two", "--key-separator", ":"}, []string{`line 2: no key separator ":"`}},
		{"line too long", "short\n" + strings.Repeat("y", 513) + "\n", []string{"produce", "two", "--max-message-bytes", "512"}, []string{"line longer than --max-message-bytes"}},
		{"max message bytes too small", "", []string{"produce", "two", "--max-message-bytes", "511"}, []string{"--max-message-bytes 511"}},
		{"bad acks", "", []string{"produce", "two", "--acks", "2"}, []string{`--acks "2"`}},
		{"bad compression", "", []string{"produce", "two", "--compression", "brotli"}, []string{`--compression "brotli"`}},
		{"bad header", "", []string{"produce", "two", "--header", "nokv"}, []string{`--header "nokv"`}},
		{"both key flags", "", []string{"produce", "two", "--key-field", "a", "--key-separator", ":"}, []string{"key-field", "key-separator"}},
		{"bad isolation", "", []string{"consume", "two", "--isolation", "dirty"}, []string{`--isolation "dirty"`}},
		{"bad format", "", []string{"consume", "two", "--format", "%q"}, []string{"unknown verb %q"}},
		{"group with partition", "", []string{"consume", "two", "--group", "g", "--partition", "1"}, []string{"group", "partition"}},
		{"offset and from-beginning", "", []string{"consume", "two", "--offset", "1", "--from-beginning"}, []string{"from-beginning", "offset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, strings.NewReader(tc.stdin), append(tc.args, b)...)
			if r.err == nil {
				t.Fatalf("no error; stdout %q stderr %q", r.stdout, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error %q does not contain %q", r.err, w)
				}
			}
		})
	}
	// A broker that cannot be reached is said at once.
	r := run(t, strings.NewReader("a\nb\n"), "produce", "two", "--brokers", "127.0.0.1:1", "--delivery-timeout", "1s", "-q")
	if r.err == nil || !strings.Contains(r.err.Error(), "cannot reach a broker of 127.0.0.1:1") {
		t.Errorf("produce to no broker: %v", r.err)
	}

	// Records before a bad line were produced and acknowledged.
	r = mustRun(t, nil, "consume", "two", b, "-q", "--from-beginning", "--until-end")
	got := strings.Split(r.stdout, "\n")
	slices.Sort(got)
	if w := []string{"", "1", "short", `{"k":"1"}`}; !slices.Equal(got, w) {
		t.Errorf("records before the bad lines: %q", r.stdout)
	}
}

// TestConsumeAfterDeleteRecords checks where consume starts when the
// requested or committed offset is below the log start offset, and that
// --until-end still stops. It runs against kfake only: Samsa has no
// DeleteRecords and no group coordinator yet.
func TestConsumeAfterDeleteRecords(t *testing.T) {
	addr := startFake(t)
	b := "--brokers=" + addr
	mustRun(t, nil, "topic", "create", "trim", b, "-p", "1")
	mustRun(t, nil, "topic", "create", "gone", b, "-p", "1")
	ten := lines("0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
	mustRun(t, strings.NewReader(ten), "produce", "trim", b, "-q")
	mustRun(t, strings.NewReader(ten), "produce", "gone", b, "-q")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	defer adm.Close()
	var commit kadm.Offsets
	commit.AddOffset("trim", 0, 2, -1)
	commit.AddOffset("gone", 0, 2, -1)
	if err := adm.CommitAllOffsets(ctx, "old", commit); err != nil {
		t.Fatal(err)
	}
	var del kadm.Offsets
	del.AddOffset("trim", 0, 5, -1)
	del.AddOffset("gone", 0, 10, -1)
	resps, err := adm.DeleteRecords(ctx, del)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trim", "--offset", "3", "--until-end"}, lines("5", "6", "7", "8", "9")},
		{[]string{"trim", "--offset", "-8", "--until-end"}, lines("5", "6", "7", "8", "9")},
		{[]string{"trim", "--from-beginning", "--until-end"}, lines("5", "6", "7", "8", "9")},
		{[]string{"gone", "--offset", "3", "--until-end"}, ""},
		{[]string{"gone", "--from-beginning", "--until-end"}, ""},
		// The committed offset 2 is gone: the group starts at the end, or
		// at the log start with --from-beginning.
		{[]string{"trim", "--group", "old", "--until-end"}, ""},
		{[]string{"gone", "--group", "old", "--until-end", "--from-beginning"}, ""},
		{[]string{"trim", "--group", "old", "--until-end", "--from-beginning"}, lines("5", "6", "7", "8", "9")},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := mustRun(t, nil, append([]string{"consume", "-q", b}, tc.args...)...)
			if r.stdout != tc.want {
				t.Errorf("consume %v: %q, want %q", tc.args, r.stdout, tc.want)
			}
		})
	}
}

// TestConsumeGroupJoining: while a new group's first rebalance waits
// group.initial.rebalance.delay.ms (3 s by default on a Samsa node), samsa
// consume --group says it is joining, not "0 records consumed" once a
// second as if it hung, then says which partitions it got.
func TestConsumeGroupJoining(t *testing.T) {
	b := "--brokers=" + startSamsa(t, "")
	mustRun(t, nil, "topic", "create", "j", b, "-p", "2")
	mustRun(t, strings.NewReader(lines("a")), "produce", "j", b, "-q", "--partition", "1")
	r := mustRun(t, nil, "consume", "j", b, "--group", "joiners", "--from-beginning", "--max-messages", "1")
	if r.stdout != "a\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	joined := strings.Index(r.stderr, "samsa consume: joined group joiners, assigned partitions 0,1\n")
	if !strings.HasPrefix(r.stderr, "samsa consume: joining group joiners;") || joined < 0 {
		t.Fatalf("stderr does not tell joining, then joined:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr[:joined], "records consumed") || !strings.Contains(r.stderr[:joined], "samsa consume: joining group joiners (") {
		t.Fatalf("progress while joining:\n%s", r.stderr)
	}
}
