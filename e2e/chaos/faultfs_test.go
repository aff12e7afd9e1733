package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/proctest"
)

// faultfsPkg is the fault harness's build of the samsa command.
const faultfsPkg = "./e2e/chaos/faultfs"

// faultCommand sends one command to the control socket of a faultfs
// process and returns its answer; a crash answers nothing (the process
// kills itself), which is "" and no error.
func faultCommand(socket, cmd string) (string, error) {
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintln(c, cmd); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if strings.HasPrefix(cmd, "crash") && line == "" {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "ok") {
		return line, fmt.Errorf("%s: %s", cmd, line)
	}
	return line, nil
}

// startFaultNode runs a single faultfs node on dir (a fresh temporary
// one when empty) with its control socket next to it.
func startFaultNode(t *testing.T, dir string, overrides ...string) (*proctest.Server, string) {
	t.Helper()
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "faultfs-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	socket := dir + ".sock"
	args := []string{"-control", socket, "server",
		"--override", "log.dirs=" + dir,
		"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"--override", "http.listener="}
	for _, o := range overrides {
		args = append(args, "--override", o)
	}
	s, err := proctest.StartProcess(proctest.BinaryOf(t, faultfsPkg), dir, 30*time.Second, args...)
	if s != nil {
		t.Cleanup(func() { s.Kill(); os.Remove(socket) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, socket
}

// produceN produces n records "prefix-i" to partition 0 of topic with
// acks=all and fails the test unless each is acknowledged.
func produceN(t *testing.T, addr, topic, prefix string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
			t.Fatalf("produce %s-%d: %v", prefix, i, err)
		}
	}
}

// produceAcked produces value to partition 0 of topic, giving up after
// 2 s, and reports whether it was acknowledged.
func produceAcked(t *testing.T, addr, topic, value string) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A halting node may hold the request unanswered until it exits:
	// not acknowledged either way. The wait is bounded here, not by the
	// client: franz-go checks a buffered record's context and delivery
	// timeout when it sends it or loads metadata; with the node gone and
	// the record not in any produce request it did neither (ProduceSync
	// hung 45 min in TestHaltExitsOne at load 25, no produce goroutine
	// in the dump). Close fails the record.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acked := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Value: []byte(value)}, func(_ *kgo.Record, err error) { acked <- err })
	select {
	case err := <-acked:
		return err == nil
	case <-ctx.Done():
		return false
	}
}

// readValues reads partition 0 of topic to its high-watermark.
func readValues(t *testing.T, addr, topic string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ends kadm.ListedOffsets
	for {
		ends, err = kadm.NewClient(cl).ListEndOffsets(ctx, topic)
		if err == nil && ends.Error() == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("ListEndOffsets %s: %v %v", topic, err, ends.Error())
		}
		<-time.After(100 * time.Millisecond) // the restarted node loads its logs
	}
	end, _ := ends.Lookup(topic, 0)
	var out []string
	for int64(len(out)) < end.Offset {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %d of %d records: %v", topic, len(out), end.Offset, err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

func createTopic(t *testing.T, addr, topic string, configs map[string]*string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, configs, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// TestHaltExitsOne: a samsa server process whose only log dir goes
// offline (fsync fails under flush.messages=1) halts and exits with
// status 1 after logging why, as Kafka's broker halts (Exit.halt(1));
// the record that met the failure is not acknowledged, and the records
// acknowledged before are there after a restart on a healthy disk.
func TestHaltExitsOne(t *testing.T) {
	dir, err := os.MkdirTemp("", "faultfs-halt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, socket := startFaultNode(t, dir)
	one := "1"
	createTopic(t, s.Addr, "halt", map[string]*string{"flush.messages": &one})
	produceN(t, s.Addr, "halt", "acked", 10)
	if _, err := faultCommand(socket, "fsync-fail"); err != nil {
		t.Fatal(err)
	}
	if produceAcked(t, s.Addr, "halt", "unsynced") {
		t.Fatal("a record was acknowledged while fsync failed under flush.messages=1")
	}
	code, err := s.Wait(20 * time.Second)
	if err != nil {
		t.Fatalf("the node did not halt with its only log dir offline: %v", err)
	}
	if code != 1 {
		t.Fatalf("exit status %d, want 1", code)
	}
	for _, re := range []string{`msg="the node halts \(closes\)" .*every log dir is offline`, `msg="exiting: the node halted"`, `samsa: every log dir is offline after an I/O error`} {
		if !regexp.MustCompile(re).MatchString(s.Logs()) {
			t.Errorf("the node's log lacks %q", re)
		}
	}
	s, _ = startFaultNode(t, dir)
	// The record that was not acknowledged may be there or not: it
	// reached the page cache, which the process's exit keeps.
	got := readValues(t, s.Addr, "halt")
	if len(got) < 10 || len(got) > 11 || len(got) == 11 && got[10] != "unsynced" {
		t.Fatalf("after restart records %q, want the 10 acknowledged (and maybe the unacknowledged one)", got)
	}
	for i, v := range got[:10] {
		if want := fmt.Sprintf("acked-%d", i); v != want {
			t.Fatalf("offset %d: %q, want %q", i, v, want)
		}
	}
	produceN(t, s.Addr, "halt", "again", 1)
}

// TestCrashLosesUnsynced: faultfs's crash leaves the disk as a power
// loss would. A topic with flush.messages=1 keeps every acknowledged
// record; one with the default flush (never) loses what was written since
// its last fsync, acknowledged or not, which is all of it here; the
// restarted node recovers and takes writes.
func TestCrashLosesUnsynced(t *testing.T) {
	dir, err := os.MkdirTemp("", "faultfs-crash-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, socket := startFaultNode(t, dir)
	one := "1"
	createTopic(t, s.Addr, "synced", map[string]*string{"flush.messages": &one})
	createTopic(t, s.Addr, "unsynced", nil)
	produceN(t, s.Addr, "synced", "s", 20)
	produceN(t, s.Addr, "unsynced", "u", 20)
	if _, err := faultCommand(socket, "crash"); err != nil {
		t.Fatal(err)
	}
	if code, err := s.Wait(10 * time.Second); err != nil || code != -1 {
		t.Fatalf("crash: exit status %d, %v; want killed by a signal", code, err)
	}
	if !strings.Contains(s.Logs(), "faultfs: power loss") {
		t.Fatal("the node did not log the power loss")
	}
	s, _ = startFaultNode(t, dir)
	if got := readValues(t, s.Addr, "synced"); len(got) != 20 {
		t.Fatalf("flush.messages=1: %d records after the power loss, want the 20 acknowledged", len(got))
	}
	if got := readValues(t, s.Addr, "unsynced"); len(got) >= 20 {
		t.Fatalf("default flush: %d records after the power loss, want fewer than the 20 written (nothing was fsynced)", len(got))
	}
	produceN(t, s.Addr, "unsynced", "after", 1)
}

// TestDiskFullProcess: a faultfs node whose disk fills refuses writes
// and takes them again once space returns, without halting (a full disk
// does not take the dir offline, docs/reliability.md).
func TestDiskFullProcess(t *testing.T) {
	s, socket := startFaultNode(t, "")
	createTopic(t, s.Addr, "full", nil)
	produceN(t, s.Addr, "full", "before", 5)
	if _, err := faultCommand(socket, "full"); err != nil {
		t.Fatal(err)
	}
	if produceAcked(t, s.Addr, "full", "no space") {
		t.Fatal("a record was acknowledged on a full disk")
	}
	answer, err := faultCommand(socket, "free")
	if err != nil {
		t.Fatal(err)
	}
	if answer == "ok refused=0" {
		t.Fatal("no write met the full disk")
	}
	if s.Exited() {
		t.Fatalf("the node exited on a full disk:\n%s", s.Logs())
	}
	produceN(t, s.Addr, "full", "after", 5)
	got := readValues(t, s.Addr, "full")
	if len(got) != 10 || got[0] != "before-0" || got[9] != "after-4" {
		t.Fatalf("records %q, want before-0..4 and after-0..4", got)
	}
}

// TestReleaseBinaryHasNoFaults: the samsa command (cmd/samsa) does not
// link the fault-injecting filesystems; only the harness's faultfs does.
func TestReleaseBinaryHasNoFaults(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	list := func(pkg string) string {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return string(out)
	}
	const errorfs = "github.com/samsahq/samsa/internal/storage/vfs/errorfs\n"
	if strings.Contains(list("./cmd/samsa"), errorfs) {
		t.Error("cmd/samsa links internal/storage/vfs/errorfs")
	}
	if !strings.Contains(list(faultfsPkg), errorfs) {
		t.Error("e2e/chaos/faultfs does not link internal/storage/vfs/errorfs: the check above proves nothing")
	}
}
