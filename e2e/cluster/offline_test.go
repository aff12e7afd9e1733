package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/wire"
)

// TestOfflineReplicaAnswersAtOnce: a broker whose replica of a partition
// cannot be opened (its segment file is a directory) starts all the same,
// answers Produce and Fetch for that partition at once with
// KAFKA_STORAGE_ERROR (Kafka's ReplicaManager.getPartitionOrError for an
// offline replica) instead of letting the client wait out its timeout,
// while the partition's leadership stays with the replicas that could
// (moved there by its controlled shutdown), where clients keep producing.
func TestOfflineReplicaAnswersAtOnce(t *testing.T) {
	c := startCluster(t, false)
	cl := newClient(t, c)
	createTopic(t, c, cl, "off", 1, nil)
	produceOne(t, cl, "off")
	victim := mustView(t, c, "off", c.Brokers()...).parts[0].leader
	if err := c.Node(victim).Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(c.Node(victim).Dir, "off-0", "00000000000000000000.log")
	if err := os.Remove(seg); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(seg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.Node(victim).Start(); err != nil {
		t.Fatalf("node %d did not start with an unopenable replica: %v", victim, err)
	}
	if l := mustView(t, c, "off", victim).parts[0].leader; l == victim || l < 0 {
		t.Fatalf("leader %d, want another live replica than node %d", l, victim)
	}

	direct := wire.NewClient(c.Node(victim).Addr(), "offline-test", 16<<20)
	defer direct.Close()
	if code, _ := produceDirect(t, direct, "off", 0, -1, "v"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to node %d: %v, want KAFKA_STORAGE_ERROR", victim, kerr.ErrorForCode(code))
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.SetVersion(12)
	// A fetch that waited for data would take 30 s: the test's context
	// ends well before.
	freq.MaxWaitMillis, freq.MinBytes, freq.MaxBytes = 30000, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "off"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 0, 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := direct.Request(ctx, freq)
	if err != nil {
		t.Fatalf("fetch from node %d: %v", victim, err)
	}
	if code := r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch from node %d: %v, want KAFKA_STORAGE_ERROR", victim, kerr.ErrorForCode(code))
	}
	// Clients go to the leader and carry on.
	cl2 := newClient(t, c, kgo.RecordRetries(5))
	produceOne(t, cl2, "off")
}
