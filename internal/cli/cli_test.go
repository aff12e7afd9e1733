package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/samsahq/samsa"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startSamsa starts a real Samsa node (broker and controller) in-process on
// 127.0.0.1 with free ports and its data in dir (a new temporary directory
// when empty), and returns its bootstrap address; the node stops with the
// test.
func startSamsa(t *testing.T, dir string) string {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := samsa.Start(ctx, samsa.Config{Dir: dir})
	if err != nil {
		t.Fatalf("samsa: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("closing the samsa node: %v", err)
		}
	})
	return n.Addr()
}

// backends are the Kafka implementations the client commands are tested
// against: a real Samsa node, and franz-go's kfake as a reference for what
// a Kafka broker answers.
var backends = []struct {
	name  string
	start func(t *testing.T) string
}{
	{"samsa", func(t *testing.T) string { return startSamsa(t, "") }},
	{"kfake", func(t *testing.T) string { return startFake(t) }},
}

// eachBackend runs fn as a subtest against every backend.
func eachBackend(t *testing.T, fn func(t *testing.T, addr string)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.start(t)) })
	}
}

// startFake starts franz-go's in-memory Kafka (kfake) on 127.0.0.1 with
// free ports and returns its bootstrap list; the cluster stops with the test.
func startFake(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

// result is what one run of the samsa command line printed.
type result struct {
	stdout, stderr string
	err            error
}

// run executes the samsa command line in-process with args, stdin as its
// standard input, and a one-minute limit.
func run(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return runCtx(ctx, stdin, args...)
}

func runCtx(ctx context.Context, stdin io.Reader, args ...string) result {
	var out, errOut bytes.Buffer
	root := newRoot()
	root.SetArgs(args)
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	root.SetIn(stdin)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(ctx)
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

// mustRun is run that fails the test on an error.
func mustRun(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	r := run(t, stdin, args...)
	if r.err != nil {
		t.Fatalf("samsa %s: %v\nstderr: %s", strings.Join(args, " "), r.err, r.stderr)
	}
	return r
}

// pollAdmin calls done with an admin client of addr every 20 ms until it
// returns true, or fails the test, saying it never saw what, when ctx
// ends.
func pollAdmin(ctx context.Context, t *testing.T, addr, what string, done func(adm *kadm.Client) bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !done(adm) {
		select {
		case <-ctx.Done():
			t.Fatalf("never saw %s", what)
		case <-tick.C:
		}
	}
}
