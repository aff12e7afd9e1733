package console

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/console"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConsoleBrowser drives every page of node 1's console in Chromium
// against a 3-node cluster: no page logs an error; a kcat record shows
// with its headers; the filter finds one record among 100,000; an offset
// reset changes what a consumer reads next; a replayed dead letter reaches
// its source topic; read-only hides the writes; 390 and 1280 px wide pages
// do not overflow; a stopped node shows fenced and its partitions
// under-replicated.
func TestConsoleBrowser(t *testing.T) {
	chromium(t)
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{
		Dir:           t.TempDir(),
		HTTPListeners: true,
		Properties: map[string]string{
			"default.replication.factor":   "3",
			"min.insync.replicas":          "2",
			"num.partitions":               "3",
			"broker.session.timeout.ms":    "3000",
			"broker.heartbeat.interval.ms": "300",
			"replica.lag.time.max.ms":      "2000",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"events", "haystack", "orders", "orders.DLT", "tail"} {
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
	}

	// A record from kcat with headers, and one more after it.
	kc := exec.CommandContext(ctx, kcat, "-b", c.Addrs()[0], "-P", "-t", "events", "-p", "0", "-k", "kcat-key", "-H", "trace=abc123", "-H", "source=kcat")
	kc.Stdin = strings.NewReader("hello from kcat\n")
	if out, err := kc.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v: %s", err, out)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: 0, Key: []byte("second"), Value: []byte(`{"n":2}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// 100,000 records with one needle.
	const haystack, needleAt = 100_000, 61_803
	recs := make([]*kgo.Record, 0, haystack)
	for i := range haystack {
		v := "hay-" + strconv.Itoa(i)
		if i == needleAt {
			v = "the-needle-" + strconv.Itoa(i)
		}
		recs = append(recs, &kgo.Record{Topic: "haystack", Partition: int32(i % 3), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A group that consumed all of events.
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "events", Partition: 0, At: 2, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "events", Partition: 1, At: 0, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "events", Partition: 2, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "readers", os); err != nil {
		t.Fatal(err)
	}
	// A dead letter as Spring's DeadLetterPublishingRecoverer writes it.
	be32, be64 := make([]byte, 4), make([]byte, 8)
	binary.BigEndian.PutUint32(be32, 2)
	binary.BigEndian.PutUint64(be64, 41)
	dead := &kgo.Record{Topic: "orders.DLT", Partition: 0, Key: []byte("order-7"), Value: []byte(`{"order":7}`), Headers: []kgo.RecordHeader{
		{Key: "kafka_dlt-original-topic", Value: []byte("orders")},
		{Key: "kafka_dlt-original-partition", Value: be32},
		{Key: "kafka_dlt-original-offset", Value: be64},
		{Key: "kafka_dlt-exception-fqcn", Value: []byte("java.lang.IllegalStateException")},
		{Key: "kafka_dlt-exception-message", Value: []byte("no such customer")},
		{Key: "x-app", Value: []byte("shop")},
	}}
	if err := cl.ProduceSync(ctx, dead).FirstErr(); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, "http://"+c.HTTPAddr(1))

	t.Run("overview", func(t *testing.T) {
		b.t = t
		b.open("/", "#nodes")
		if n := run(b, chromedp.Evaluate[int](`document.querySelectorAll("#nodes tbody tr").length`)); n != 3 {
			t.Errorf("%d nodes listed, want 3", n)
		}
		if s := b.text("#nodes"); strings.Contains(s, "fenced") || !strings.Contains(s, "(active)") {
			t.Errorf("nodes table: %q", s)
		}
		if s := b.text("#under-replicated"); s != "0" {
			t.Errorf("under-replicated %s, want 0", s)
		}
		if s := b.text("#nodes thead"); strings.Contains(s, "Last fetch") { // the voters report none
			t.Errorf("nodes table columns: %q", s)
		}
		if s := b.text("#logdirs"); !strings.Contains(s, "node-3") {
			t.Errorf("log dirs: %q", s)
		}
		b.shot("overview", true)
	})

	t.Run("topics", func(t *testing.T) {
		b.t = t
		b.open("/topics?q=hay", "#topics")
		if s := b.text("#topics tbody"); !strings.Contains(s, "haystack") || strings.Contains(s, "events") {
			t.Errorf("search hay: %q", s)
		}
		b.open("/topics", "#topics")
		b.shot("topics", true)
		b.open("/topics/events", "#partitions")
		if s := b.text("#partitions tbody"); !strings.Contains(s, "1,2,3") && !strings.Contains(s, "3,1,2") && !strings.Contains(s, "2,3,1") {
			t.Errorf("partitions: %q", s)
		}
		if s := b.text("#topic-groups"); !strings.Contains(s, "readers") {
			t.Errorf("groups of events: %q", s)
		}
		b.shot("topic", false)
	})

	t.Run("messages", func(t *testing.T) {
		b.t = t
		b.open("/topics/events/messages?partition=0", "#messages")
		if s := b.text("#messages tbody"); !strings.Contains(s, "hello from kcat") || !strings.Contains(s, "trace=abc123") || !strings.Contains(s, "source=kcat") || !strings.Contains(s, "kcat-key") {
			t.Errorf("the kcat record: %q", s)
		}
		// Keyboard: focus the first row, Enter expands it, j moves down.
		b.do(chromedp.Focus(chromedp.CSS("tr.msg")), chromedp.KeyEvent(kb.Enter))
		if !b.eval(`!document.querySelector("tr.msg").nextElementSibling.hidden`) {
			t.Error("Enter did not expand the first record")
		}
		b.do(chromedp.KeyEvent("j"))
		if !b.eval(`document.querySelector("tr.msg.sel").dataset.offset === "1"`) {
			t.Error("j did not select the second record")
		}
		b.do(chromedp.KeyEvent("k"))
		if !b.eval(`document.querySelector("tr.msg.sel").dataset.offset === "0"`) {
			t.Error("k did not select the first record")
		}
		b.shot("messages", true)
		// Live tail: a record produced after the page loaded appears.
		b.do(chromedp.Click(chromedp.CSS("#tail")))
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: 0, Value: []byte("tailed-record")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		b.do(chromedp.WaitVisible(chromedp.CSS(`tr.msg[data-offset="2"]`)))
		if s := b.text(`tr.msg[data-offset="2"]`); !strings.Contains(s, "tailed-record") {
			t.Errorf("tailed row: %q", s)
		}
		b.do(chromedp.Click(chromedp.CSS("#tail")))
		b.noErrors("live tail")
		// The tail keeps the last 500 records: 700 produced while tailing
		// leave offsets 200 to 699 on the page.
		b.open("/topics/tail/messages?partition=0", "#messages")
		b.do(chromedp.Click(chromedp.CSS("#tail")))
		var tailed []*kgo.Record
		for i := range 700 {
			tailed = append(tailed, &kgo.Record{Topic: "tail", Partition: 0, Value: []byte("t" + strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(ctx, tailed...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		b.do(chromedp.WaitVisible(chromedp.CSS(`tr.msg[data-offset="699"]`)))
		b.do(chromedp.Click(chromedp.CSS("#tail")))
		if n := run(b, chromedp.Evaluate[int](`document.querySelectorAll("#messages tr.msg").length`)); n != 500 {
			t.Errorf("%d rows after tailing 700 records, want 500", n)
		}
		if n := run(b, chromedp.Evaluate[int](`document.querySelectorAll("#messages tr.detail").length`)); n != 500 {
			t.Errorf("%d detail rows after tailing 700 records, want 500", n)
		}
		if !b.eval(`document.querySelector("#messages tr.msg").dataset.offset === "200"`) {
			t.Error("the first row left is not offset 200")
		}
		// Decoders.
		b.open("/topics/events/messages?partition=0&mode=offset&offset=1&enc=hex&limit=1", "#messages")
		if s := b.text("#messages tbody"); !strings.Contains(s, "7b226e223a327d") {
			t.Errorf("hex value: %q", s)
		}
		// The filter finds the needle among 100,000 records.
		b.open("/topics/haystack/messages?search=1&partition=-1&value=the-needle&seconds=60", "#scan-status")
		status := b.text("#scan-status")
		if !strings.Contains(status, "Scanned 100000 records") || !strings.Contains(status, ": 1 match") || !strings.Contains(status, "reached the end") {
			t.Errorf("scan: %q", status)
		}
		if s := b.text("#messages tbody"); !strings.Contains(s, "the-needle-61803") {
			t.Errorf("scan results: %q", s)
		}
		b.shot("filter", true)
		// A budget stops the scan and offers to continue.
		b.open("/topics/haystack/messages?search=1&partition=-1&value=the-needle&budget=1000", "#continue")
		if s := b.text("#scan-status"); !strings.Contains(s, "Scanned 1000 records") || !strings.Contains(s, "stopped by the budget") {
			t.Errorf("scan with budget: %q", s)
		}
		// Produce from the page, with headers.
		b.open("/topics/events/messages?partition=1", "#messages")
		b.do(chromedp.Click(chromedp.CSS("#produce-box summary")),
			chromedp.SetValue(chromedp.CSS(`#produce select[name=partition]`), "1"),
			chromedp.SetValue(chromedp.CSS(`#produce input[name=key]`), "from-browser"),
			chromedp.SetValue(chromedp.CSS(`#produce textarea[name=value]`), "typed value"),
			chromedp.SetValue(chromedp.CSS(`#produce textarea[name=headers]`), "h1=v1"),
			chromedp.Click(chromedp.CSS("#produce button")),
			chromedp.WaitVisible(chromedp.CSS("#what")))
		if s := b.text("#what"); !strings.Contains(s, `topic "events", partition 1`) || !strings.Contains(s, "1 headers") {
			t.Errorf("produce confirmation: %q", s)
		}
		b.do(chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#messages")))
		if s := b.text("#messages tbody"); !strings.Contains(s, "typed value") || !strings.Contains(s, "h1=v1") {
			t.Errorf("produced record: %q", s)
		}
		b.noErrors("produce")
	})

	t.Run("groups", func(t *testing.T) {
		b.t = t
		b.open("/groups", "#groups")
		if s := b.text("#groups tbody"); !strings.Contains(s, "readers") || !strings.Contains(s, "Empty") {
			t.Errorf("groups: %q", s)
		}
		b.shot("groups", false)
		b.open("/groups/readers", "#lag")
		if s := b.text("#total-lag"); s != "2" { // the tailed record and the one produced from the page
			t.Errorf("total lag %s, want 2", s)
		}
		b.shot("group", true)
		b.do(chromedp.SetValue(chromedp.CSS(`#reset input[name=topic]`), "events"),
			chromedp.SetValue(chromedp.CSS(`#reset select[name=to]`), "earliest"),
			chromedp.Click(chromedp.CSS("#reset button")),
			chromedp.WaitVisible(chromedp.CSS("#preview")))
		b.noErrors("reset preview")
		if s := b.text("#preview tbody tr.changed"); !strings.Contains(s, "events\t0\t2\t0") && !strings.Contains(s, "events 0 2 0") {
			t.Errorf("preview: %q", s)
		}
		if o, _ := adm.FetchOffsets(ctx, "readers"); o["events"][0].At != 2 {
			t.Fatalf("the preview committed: %+v", o)
		}
		b.shot("reset-preview", true)
		b.do(chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#lag")))
		b.noErrors("reset")
		// The group's consumer now reads partition 0 from its start.
		first := firstRecord(t, ctx, func(r *kgo.Record) bool { return r.Partition == 0 },
			kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("events"), kgo.DisableAutoCommit())
		if first == nil || first.Offset != 0 || string(first.Value) != "hello from kcat" {
			t.Fatalf("after the reset the consumer read %+v first, want offset 0", first)
		}
	})

	t.Run("dead letters", func(t *testing.T) {
		b.t = t
		b.open("/dlt", "#dlts")
		if s := b.text("#dlts"); !strings.Contains(s, "orders.DLT") || strings.Contains(s, "events") {
			t.Errorf("dead-letter topics: %q", s)
		}
		b.open("/dlt?topic=orders.DLT", "#dead-letters")
		if s := b.text("#dead-letters tbody"); !strings.Contains(s, "orders[2]@41") || !strings.Contains(s, "java.lang.IllegalStateException") || !strings.Contains(s, "no such customer") {
			t.Errorf("dead letters: %q", s)
		}
		b.shot("dead-letters", true)
		b.do(chromedp.Click(chromedp.CSS(`#dead-letters input[name=offset]`)), chromedp.Click(chromedp.CSS("#replay > button")), chromedp.WaitVisible(chromedp.CSS("#what")))
		if s := b.text("#what"); !strings.Contains(s, "Produce 1 records") {
			t.Errorf("replay confirmation: %q", s)
		}
		b.do(chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#dead-letters")))
		b.noErrors("replay")
		got := firstRecord(t, ctx, func(*kgo.Record) bool { return true },
			kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if got == nil || got.Partition != 2 || string(got.Key) != "order-7" || !bytes.Equal(got.Value, []byte(`{"order":7}`)) || len(got.Headers) != 1 || got.Headers[0].Key != "x-app" {
			t.Fatalf("replayed record: %+v", got)
		}
	})

	t.Run("layout", func(t *testing.T) {
		b.t = t
		pages := [][2]string{{"/", "#nodes"}, {"/topics", "#topics"}, {"/topics/events", "#partitions"}, {"/topics/events/messages?partition=0", "#messages"},
			{"/topics/haystack/messages?search=1&value=hay-9999", "#scan-status"}, {"/groups", "#groups"}, {"/groups/readers", "#lag"}, {"/dlt?topic=orders.DLT", "#dead-letters"}, {"/security", "#users"}}
		for _, w := range []int64{390, 1280} {
			for _, p := range pages {
				b.noOverflow(p[0], p[1], w)
			}
		}
		b.do(chromedp.EmulateViewport(390, 800))
		b.open("/topics/events/messages?partition=0", "#messages")
		b.shot("messages-390px", false)
		b.do(chromedp.EmulateViewport(1280, 800))
	})

	t.Run("read-only", func(t *testing.T) {
		b.t = t
		ro, err := console.New(console.Config{Addr: c.Addrs()[0], ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		srv := httptest.NewServer(ro)
		defer srv.Close()
		rb := b
		rb.base = srv.URL
		defer func() { b.base = "http://" + c.HTTPAddr(1) }()
		for _, p := range [][3]string{{"/topics", "#topics", "#create-topic"}, {"/topics/events", "#configs", "#delete-topic"},
			{"/topics/events/messages?partition=0", "#messages", "#produce"}, {"/groups/readers", "#lag", "#reset"}, {"/dlt?topic=orders.DLT", "#dead-letters", "#replay button"}} {
			rb.open(p[0], p[1])
			if !rb.eval(`document.querySelector(` + strconv.Quote(p[2]) + `) === null && document.querySelector(".badge").textContent === "read-only"`) {
				t.Errorf("%s: %s shown read-only", p[0], p[2])
			}
		}
		rb.shot("read-only", false)
		resp, err := http.PostForm(srv.URL+"/do/create-topic", url.Values{"topic": {"nope"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("write to a read-only console: %d, want 403", resp.StatusCode)
		}
	})

	t.Run("fenced", func(t *testing.T) {
		b.t = t
		if err := c.StopNode(3); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			b.do(chromedp.Navigate(b.base+"/"), chromedp.WaitVisible(chromedp.CSS("#nodes")))
			state := b.text(`#nodes tr[data-node="3"] .state`)
			under := b.text("#under-replicated")
			if state == "fenced" && under != "0" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node 3 is %q and %s partitions under-replicated 30 s after it stopped", state, under)
			}
			<-tick.C
		}
		b.noErrors("fenced overview")
		b.shot("overview-fenced", true)
		if s := b.text("#logdirs"); !strings.Contains(s, "no answer") {
			t.Errorf("log dirs with node 3 stopped: %q, want its row of unknown sizes", s)
		}
		// The topic page shows sizes, not the stopped node's
		// DescribeLogDirs error.
		b.open("/topics/events", "#partitions")
		if s := b.text("main"); strings.Contains(s, "DescribeLogDirs") || strings.Contains(s, "unknown broker") {
			t.Errorf("topic page with node 3 stopped: %q", s)
		}
	})
}

// firstRecord consumes with opts until a record satisfies keep (nil after
// 20 s), then closes the consumer.
func firstRecord(t *testing.T, ctx context.Context, keep func(*kgo.Record) bool, opts ...kgo.Opt) *kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var got *kgo.Record
	for got == nil && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if got == nil && keep(r) {
				got = r
			}
		})
	}
	return got
}
