package quorum

import (
	"context"
	"fmt"
	"testing"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/storage"
	"github.com/samsahq/samsa/internal/testutil"
)

// BenchmarkReplay replays a metadata log of 200 topics of 100 partitions
// (one entry per topic, as CreateTopics writes them), as a node's start
// does before it serves: at 100,000 partitions decoding the records was
// most of the time between the logs being open and the controller being
// active. It reports the process's CPU time per replay (cpu-ms/op).
//
//	go test -run '^$' -bench Replay ./internal/quorum
func BenchmarkReplay(b *testing.B) {
	const topics, parts = 200, 100
	logs, err := storage.OpenManager(storage.ManagerOptions{Dirs: []string{b.TempDir()}, NodeID: 1, ClusterID: "bench-replay"})
	if err != nil {
		b.Fatal(err)
	}
	defer logs.Close()
	l, err := OpenLocal(logs)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for t := range topics {
		id := metadata.UUID{byte(t), byte(t >> 8), 1}
		recs := []metadata.Record{metadata.TopicRecord{Name: fmt.Sprintf("topic-%04d", t), ID: id}}
		for p := range int32(parts) {
			recs = append(recs, metadata.PartitionRecord{TopicID: id, Partition: p, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
		}
		if _, err := l.Append(context.Background(), recs); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := int64(testutil.ProcessCPU(b))
	for b.Loop() {
		n := 0
		if err := l.Replay(func(_ int64, recs []metadata.Record) error {
			n += len(recs)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if n != topics*(parts+1) {
			b.Fatalf("replayed %d records, want %d", n, topics*(parts+1))
		}
	}
	b.ReportMetric(float64(int64(testutil.ProcessCPU(b))-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}
