package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/proctest"
)

// TestSecondServerSameDir: a second samsa server started on the log dir
// of a running one exits at once with an error naming the dir and the
// first one's process id (the dir's .lock, as Kafka's LogManager locks
// it), before it recovers anything; it used to recover every log and
// then fail on its port, or, on free ports, run beside the first one on
// the same files. The first server goes on serving.
func TestSecondServerSameDir(t *testing.T) {
	dir := t.TempDir()
	first := proctest.Start(t, dir)
	second, err := proctest.StartProcess(proctest.Binary(t), dir, 30*time.Second, "server",
		"--override", "log.dirs="+dir,
		"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--override", "http.listener=")
	if second != nil {
		t.Cleanup(second.Kill)
	}
	if err == nil {
		t.Fatal("a second server started on the same log dir")
	}
	code, werr := second.Wait(10 * time.Second)
	if werr != nil || code == 0 {
		t.Fatalf("second server: exit %d, %v, want a failure", code, werr)
	}
	want := fmt.Sprintf("log dir %s is in use by process %d", dir, first.Pid())
	if logs := second.Logs(); !strings.Contains(logs, want) {
		t.Fatalf("second server's output lacks %q:\n%s", want, logs)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(first.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "locked"); err != nil || resp.Err != nil {
		t.Fatalf("first server: create topic: %v %v", err, resp.Err)
	}
}
