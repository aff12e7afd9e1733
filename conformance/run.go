package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Status is the outcome of one scenario for one client.
type Status string

// The statuses of a table cell.
const (
	Pass   Status = "pass"
	Fail   Status = "fail"
	NA     Status = "na"     // the client has no such feature
	NotYet Status = "notyet" // the broker does not advertise the APIs yet
)

// Result is one cell of the table.
type Result struct {
	Status   Status
	Detail   string        // why, for anything but a plain pass
	Known    string        // the known-failures.txt reason, for a known failure
	Duration time.Duration // the runner's wall time
	Output   string        // the runner's output tail, for the test log
	// Data is the runner's last `DATA ` line without the prefix: what a
	// scenario's runner reports for the driver to check (Env.Reported).
	Data string
}

// Client is one row of the table: a runner program and its arguments.
type Client struct {
	ID      string   // row name and key in known-failures.txt
	Library string   // protocol implementation, for the doc
	Argv    []string // runner command; the driver appends the scenario flags
	Version string   // filled from the runner's "version" scenario
}

// RunRunner runs c's runner for one scenario and parses the RESULT and DATA
// lines of its standard output; standard error (librdkafka's and the JVM's
// logs, a Python traceback) goes only into Result.Output and, when there is
// no RESULT line, Result.Detail. The runner is killed after timeout.
func RunRunner(ctx context.Context, c Client, timeout time.Duration, args ...string) Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := append(append([]string{}, c.Argv...), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 5 * time.Second
	var out, stderr bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	r := Result{Duration: time.Since(start), Output: tail(out.String(), 4000)}
	if stderr.Len() > 0 {
		r.Output += "\n--- stderr:\n" + tail(stderr.String(), 4000)
	}
	line := ""
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
			line = s
		}
		if s, ok := strings.CutPrefix(sc.Text(), "DATA "); ok {
			r.Data = s
		}
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		r.Status, r.Detail = Fail, fmt.Sprintf("runner timed out after %v", timeout)
		return r
	case line == "":
		last := lastLine(stderr.String())
		if last == "" {
			last = lastLine(out.String())
		}
		r.Status, r.Detail = Fail, fmt.Sprintf("runner printed no RESULT line (%v): %s", err, last)
		return r
	}
	var res struct{ Status, Detail string }
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		r.Status, r.Detail = Fail, fmt.Sprintf("bad RESULT line %q: %v", line, err)
		return r
	}
	r.Status, r.Detail = Status(res.Status), res.Detail
	switch r.Status {
	case Pass, Fail, NA:
	default:
		r.Status, r.Detail = Fail, fmt.Sprintf("runner status %q: %s", res.Status, res.Detail)
	}
	return r
}

// ServerOverrides are the --override flags of every scenario server:
// compacted-read waits for the log cleaner, which otherwise sleeps 15s
// (log.cleaner.backoff.ms) between looks at the compacted logs.
var ServerOverrides = []string{"log.cleaner.backoff.ms=200"}

// RunClient starts a samsa server for c, runs every single-node scenario
// through c's runner, and stops the server; then it runs the scenarios
// whose Nodes is ClusterNodes on cluster, which every client shares (their
// topics and groups are named after the client too). logf receives
// progress and failures' output.
func RunClient(ctx context.Context, bin, dataDir string, c *Client, scenarios []Scenario, cluster *Cluster, logf func(string, ...any)) (map[string]Result, error) {
	results := map[string]Result{}
	var single, multi []Scenario
	for _, s := range scenarios {
		if s.Nodes > 1 {
			multi = append(multi, s)
		} else {
			single = append(single, s)
		}
	}
	sec, err := NewSecurity(dataDir + "-pki")
	if err != nil {
		return nil, err
	}
	srv, err := StartServer(bin, dataDir, append(append([]string{}, ServerOverrides...), sec.Overrides()...)...)
	if err != nil {
		return nil, err
	}
	defer srv.Stop(10 * time.Second)
	if err := sec.Bound(srv.Logs()); err != nil {
		return nil, err
	}
	v := RunRunner(ctx, *c, time.Minute, "--scenario", "version", "--bootstrap", srv.Addr)
	if v.Status != Pass {
		return nil, fmt.Errorf("client %s does not run: %s\n%s", c.ID, v.Detail, v.Output)
	}
	c.Version = v.Detail
	on := target{bootstrap: srv.Addr, dir: srv.Dir, rf: 1, sec: sec,
		exited: func() string {
			if srv.Exited() {
				return "the samsa server"
			}
			return ""
		},
		logs: srv.Logs}
	if err := runOn(ctx, c, on, single, results, logf); err != nil {
		return nil, err
	}
	if srv.Exited() {
		logf("samsa server for %s exited; its log:\n%s", c.ID, tail(srv.Logs(), 20000))
	}
	if len(multi) == 0 {
		return results, nil
	}
	if cluster == nil {
		return nil, errors.New("scenarios on a cluster and no cluster started")
	}
	on = target{bootstrap: cluster.Nodes[0].Addr(), seeds: cluster.Addrs(), rf: ClusterNodes, prefix: c.ID + "-",
		exited: func() string {
			for _, n := range cluster.Nodes {
				if !n.Running() {
					return fmt.Sprintf("node %d of the cluster", n.ID)
				}
			}
			return ""
		}}
	if err := runOn(ctx, c, on, multi, results, logf); err != nil {
		return nil, err
	}
	return results, nil
}

// target is where runOn runs scenarios: a single node or the cluster.
type target struct {
	bootstrap string   // given to the runner
	seeds     []string // the driver's seed brokers; nil means bootstrap
	dir       string   // the single node's log.dirs
	rf        int16    // replication factor of the scenarios' topics
	sec       *Security
	prefix    string        // before the scenario ID in topic and group names
	exited    func() string // which server process exited, "" if none
	// logs returns the single node's log so far; nil on the cluster,
	// whose nodes' logs its cleanup prints on failure.
	logs func() string
}

// runOn runs scenarios through c's runner on t and puts their results
// into results.
func runOn(ctx context.Context, c *Client, t target, scenarios []Scenario, results map[string]Result, logf func(string, ...any)) error {
	seeds := t.seeds
	if seeds == nil {
		seeds = []string{t.bootstrap}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	apis, err := advertised(ctx, cl)
	if err != nil {
		return fmt.Errorf("ApiVersions against %s: %w", t.bootstrap, err)
	}
	groupsAdvertised := "0"
	if missing(apis, groupNeeds) == nil {
		groupsAdvertised = "1"
	}
	for _, s := range scenarios {
		if who := t.exited(); who != "" {
			results[s.ID] = Result{Status: Fail, Detail: who + " had exited"}
			continue
		}
		if m := missing(apis, s.Needs); m != nil {
			results[s.ID] = Result{Status: NotYet, Detail: "the broker does not advertise " + strings.Join(m, ", ")}
			continue
		}
		e := &Env{Client: cl, Admin: adm, Topic: "conf-" + t.prefix + s.ID, Group: "conf-" + t.prefix + s.ID,
			Addr: t.bootstrap, Dir: t.dir, Logf: func(format string, args ...any) {
				logf("%s %s: "+format, append([]any{c.ID, s.ID}, args...)...)
			}}
		r := runScenario(ctx, *c, t, e, s, groupsAdvertised)
		if who := t.exited(); who != "" {
			r.Status = Fail
			r.Detail = who + " exited during the scenario; " + r.Detail
		}
		if r.Status == Fail {
			logf("%s %s: FAIL: %s\n--- runner output:\n%s%s", c.ID, s.ID, r.Detail, r.Output, serverLines(t, e.Topic))
		} else {
			logf("%s %s: %s %s (%v)", c.ID, s.ID, r.Status, r.Detail, r.Duration.Round(time.Millisecond))
		}
		results[s.ID] = r
	}
	return nil
}

func runScenario(ctx context.Context, c Client, t target, e *Env, s Scenario, groups string) Result {
	setupCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if s.Partitions > 0 {
		var configs map[string]*string
		for k, v := range s.Configs {
			if configs == nil {
				configs = map[string]*string{}
			}
			configs[k] = &v
		}
		resp, err := e.Admin.CreateTopic(setupCtx, s.Partitions, t.rf, configs, e.Topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return Result{Status: Fail, Detail: fmt.Sprintf("setup: create topic %s with franz-go: %v", e.Topic, err)}
		}
		if err := waitTopic(setupCtx, e, s.Partitions); err != nil {
			return Result{Status: Fail, Detail: err.Error()}
		}
	}
	if s.Setup != nil {
		if err := s.Setup(setupCtx, e); err != nil {
			return Result{Status: Fail, Detail: err.Error()}
		}
	}
	bootstrap, secArgs := t.bootstrap, []string(nil)
	if s.Listener != "" {
		bootstrap, secArgs = t.sec.RunnerArgs(s.Listener)
	}
	args := append([]string{"--scenario", s.Runner, "--bootstrap", bootstrap, "--topic", e.Topic,
		"--group", e.Group, "--groups", groups}, secArgs...)
	if s.Codec != "" {
		args = append(args, "--codec", s.Codec)
	}
	r := RunRunner(ctx, c, 3*time.Minute, args...)
	if r.Status == Pass && s.Verify != nil {
		e.Reported = r.Data
		vctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := s.Verify(vctx, e); err != nil {
			r.Status, r.Detail = Fail, err.Error()
		}
	}
	return r
}

// waitTopic waits until every broker's metadata lists e.Topic with its
// partitions, each with a leader. CreateTopics answers once the controller
// committed the topic (and the broker that forwarded it has it), not once
// every broker has: on the cluster a runner given another node as
// bootstrap could see the topic unknown (for up to 262 ms in our runs)
// and then depend on its client's own retries (librdkafka 2.0's consumer
// subscribed to a topic not yet created got its assignment 4 s after the
// create), as Kafka's own tests wait for metadata to propagate after a
// create.
func waitTopic(ctx context.Context, e *Env, partitions int32) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(e.Topic)
	req.Topics = append(req.Topics, rt)
	want := fmt.Sprintf("%d partitions with leaders", partitions)
	return onEveryBroker(ctx, e, "metadata of "+e.Topic, want, func(b *kgo.Broker) string {
		return topicState(req.RequestWith(ctx, b))
	})
}

// onEveryBroker asks every broker of e's cluster, one after the other,
// until ask returns want, every 50ms, and logs the brokers that did not
// at first; it fails when ctx ends first, naming the broker and what it
// last answered.
func onEveryBroker(ctx context.Context, e *Env, what, want string, ask func(*kgo.Broker) string) error {
	// BrokerMetadata asks for no topic: kadm's ListBrokers asks for all
	// and leaves franz-go's cache of every topic fresh for 5 s
	// (MetadataMinAge), which a later ListTopics answers from.
	md, err := e.Admin.BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("setup: list brokers: %w", err)
	}
	for _, b := range md.Brokers {
		start, first := time.Now(), ""
		for {
			got := ask(e.Client.Broker(int(b.NodeID)))
			if got == want {
				if first != "" {
					e.logf("broker %d's %s was %s at first; %s after %v", b.NodeID, what, first, want, time.Since(start).Round(time.Millisecond))
				}
				break
			}
			if first == "" {
				first = got
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("setup: broker %d's %s: %s, want %s", b.NodeID, what, got, want)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// topicState describes the one topic of a metadata response: an error, or
// how many partitions it has with leaders.
func topicState(resp *kmsg.MetadataResponse, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case len(resp.Topics) != 1:
		return fmt.Sprintf("%d topics", len(resp.Topics))
	case resp.Topics[0].ErrorCode != 0:
		return kerr.ErrorForCode(resp.Topics[0].ErrorCode).Error()
	}
	led := 0
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode == 0 && p.Leader >= 0 {
			led++
		}
	}
	if led != len(resp.Topics[0].Partitions) {
		return fmt.Sprintf("%d of %d partitions with leaders", led, len(resp.Topics[0].Partitions))
	}
	return fmt.Sprintf("%d partitions with leaders", led)
}

// serverLines returns, for a failure's log, the last lines of the single
// node's log that name topic (the scenario's topic and group share the
// name), or "" on the cluster.
func serverLines(t target, topic string) string {
	if t.logs == nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(t.logs(), "\n") {
		if strings.Contains(l, topic) {
			lines = append(lines, l)
		}
	}
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return "\n--- the server's log lines naming " + topic + ":\n" + strings.Join(lines, "\n")
}

// advertised returns the API keys the broker advertises.
func advertised(ctx context.Context, cl *kgo.Client) (map[int16]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "samsa-conformance"
	req.ClientSoftwareVersion = "1"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int16]bool{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = true
	}
	return out, nil
}

// missing returns the names of the keys the broker does not advertise, or
// nil.
func missing(apis map[int16]bool, needs []kmsg.Key) []string {
	var m []string
	for _, k := range needs {
		if !apis[int16(k)] {
			m = append(m, kmsg.NameForKey(int16(k)))
		}
	}
	sort.Strings(m)
	return m
}

// KnownFailures reads known-failures.txt: lines "client scenario reason",
// '#' comments. It returns reasons keyed by "client scenario".
func KnownFailures(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) < 3 {
			return nil, fmt.Errorf("%s:%d: want `client scenario reason`", path, i+1)
		}
		out[f[0]+" "+f[1]] = strings.TrimSpace(f[2])
	}
	return out, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return tail(s, 300)
}
