package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/proctest"
)

// TestKillDuringMetadataSnapshot kills a single node with SIGKILL while it
// writes metadata snapshots (one per KiB of metadata log, so one is being
// written most of the time) and topics are being created, three times.
// Each restart loads a snapshot and replays the log after it: every topic
// whose creation was acknowledged is there with its partitions. Before the
// last restart the newest snapshot is damaged: the node falls back to the
// one before it, with the same topics.
func TestKillDuringMetadataSnapshot(t *testing.T) {
	dir := t.TempDir()
	opts := []string{"metadata.log.max.record.bytes.between.snapshots=1024"}
	proctest.Binary(t) // built before the deadline starts: minutes on a loaded machine
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	created := map[string]bool{}
	mdir := filepath.Join(dir, "__cluster_metadata-0")
	for round := range 3 {
		srv := proctest.Start(t, dir, opts...)
		if round > 0 {
			if _, err := srv.WaitLog(regexp.MustCompile(`loaded metadata snapshot`), 0, 10*time.Second); err != nil {
				t.Fatalf("round %d: no snapshot loaded: %v\n%s", round, err, srv.Logs())
			}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr))
		if err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(cl)
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for name := range created {
			if td, ok := topics[name]; !ok || len(td.Partitions) != 4 {
				t.Fatalf("round %d: acknowledged topic %s lost after the kill", round, name)
			}
		}
		// Create topics from 4 goroutines; kill after 60 acknowledged.
		var mu sync.Mutex
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var once sync.Once
		for g := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					name := fmt.Sprintf("r%d-g%d-%d", round, g, i)
					res, err := adm.CreateTopic(ctx, 4, 1, nil, name)
					if err != nil || res.Err != nil {
						return // the kill
					}
					mu.Lock()
					created[name] = true
					n := len(created)
					mu.Unlock()
					if n >= 60*(round+1) {
						once.Do(func() { close(stop) })
					}
				}
			})
		}
		<-stop
		srv.Kill()
		wg.Wait()
		cl.Close()
		snaps, _ := filepath.Glob(filepath.Join(mdir, "*.checkpoint"))
		if len(snaps) == 0 {
			t.Fatalf("round %d: no snapshot written\n%s", round, srv.Logs())
		}
		if round == 2 {
			sort.Strings(snaps)
			newest := snaps[len(snaps)-1]
			b, err := os.ReadFile(newest)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(newest, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv := proctest.Start(t, dir, opts...)
	if _, err := srv.WaitLog(regexp.MustCompile(`skipping unreadable metadata snapshot`), 0, 10*time.Second); err != nil {
		t.Fatalf("the damaged snapshot was not skipped: %v\n%s", err, srv.Logs())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name := range created {
		if td, ok := topics[name]; !ok || len(td.Partitions) != 4 {
			t.Fatalf("acknowledged topic %s lost", name)
		}
	}
	if err := srv.Stop(30 * time.Second); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
}
