package samsa_test

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/testutil"
)

// A node writes metadata snapshots as its metadata log grows and reports
// them as Kafka does (SnapshotEmitter, MetadataLoader); restarted, it
// loads one and has every topic.
func TestMetadataSnapshotMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := samsa.Config{Dir: dir, HTTPListener: "127.0.0.1:0", Properties: map[string]string{"metadata.log.max.record.bytes.between.snapshots": "1024"}}
	gauge := func(n *samsa.Node, name string) int64 {
		t.Helper()
		_, body := httpGet(t, "http://"+n.HTTPAddr()+"/metrics", "")
		m := regexp.MustCompile(`\n` + name + ` (\S+)\n`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return int64(v)
	}
	n, err := samsa.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	for i := range 5 {
		if _, err := adm.CreateTopic(ctx, 10, 1, nil, fmt.Sprint("snap-", i)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 20*time.Second, "a metadata snapshot", func() bool {
		return gauge(n, "kafka_server_snapshotemitter_latestsnapshotgeneratedbytes") > 0
	})
	if got := gauge(n, "kafka_server_metadataloader_handleloadsnapshotcount"); got != 0 {
		t.Fatalf("%d snapshots loaded at the first start", got)
	}
	cl.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n, err = samsa.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if got := gauge(n, "kafka_server_metadataloader_handleloadsnapshotcount"); got != 1 {
		t.Fatalf("%d snapshots loaded at restart, want 1", got)
	}
	if got := gauge(n, "kafka_server_snapshotemitter_latestsnapshotgeneratedbytes"); got <= 0 {
		t.Fatalf("latest snapshot of %d bytes after loading one", got)
	}
	cl, err = kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if td, ok := topics[fmt.Sprint("snap-", i)]; !ok || len(td.Partitions) != 10 {
			t.Fatalf("topic snap-%d after restart: %+v", i, td)
		}
	}
}

// sameImages waits until the metadata images of nodes ids are at the same
// offset and checks that they hold the same records; it returns that
// image.
func sameImages(t *testing.T, c *samsa.Cluster, ids []int32) *metadata.Image {
	t.Helper()
	var im *metadata.Image
	testutil.WaitFor(t, 30*time.Second, "the same metadata image on every node", func() bool {
		ims := map[int32]*metadata.Image{}
		for _, id := range ids {
			ims[id] = samsa.MetadataImage(c.Node(id))
			if ims[id].Offset != ims[ids[0]].Offset {
				return false
			}
		}
		want := ims[ids[0]].Records()
		for _, id := range ids[1:] {
			if got := ims[id].Records(); !reflect.DeepEqual(got, want) {
				t.Fatalf("node %d's image at offset %d differs from node %d's: %d records, want %d", id, ims[id].Offset, ids[0], len(got), len(want))
			}
		}
		im = ims[ids[0]]
		return true
	})
	return im
}

// lasting are the records of im that a restart leaves as they are: all
// but partition leadership and broker registrations (epochs, fencing),
// which it changes, and the producer id block, which it may advance; for
// those, the partitions' replicas and the brokers' endpoints and racks.
func lasting(im *metadata.Image) (recs []metadata.Record, replicas map[string][][]int32, brokers []metadata.RegisterBrokerRecord) {
	replicas = map[string][][]int32{}
	for _, r := range im.Records() {
		switch r := r.(type) {
		case metadata.PartitionRecord:
			name := im.TopicByID(r.TopicID).Name
			replicas[name] = append(replicas[name], r.Replicas)
		case metadata.RegisterBrokerRecord:
			brokers = append(brokers, metadata.RegisterBrokerRecord{BrokerID: r.BrokerID, Endpoints: r.Endpoints, Rack: r.Rack})
		case metadata.ProducerIDsRecord:
		default:
			recs = append(recs, r)
		}
	}
	return recs, replicas, brokers
}

// TestMetadataSnapshotClusterRestart: three nodes whose metadata images
// hold every kind of state (topics with configs, a deleted topic, broker
// registrations with racks, per-broker and cluster-default broker
// configs, group configs, ACLs, SCRAM credentials, client quotas, a
// finalized feature level, a producer id block) write snapshots covering
// all of it, stop together and start again. Each loads such a snapshot,
// so that state comes from the snapshot alone, not from replaying the log
// below it; the three images are the same record for record once at the
// same offset, and equal the image before the stop but for what a restart
// changes (leaders and epochs; the brokers' endpoints and racks, the
// partitions' replicas stay). The clients see every setting again.
func TestMetadataSnapshotClusterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ids := []int32{1, 2, 3}
	logs := new(testutil.SyncBuffer)
	t.Cleanup(func() {
		if t.Failed() {
			lines := strings.Split(logs.String(), "\n")
			t.Logf("the nodes' last log lines:\n%s", strings.Join(lines[max(0, len(lines)-300):], "\n"))
		}
	})
	start := time.Now()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Nodes: 3, Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Properties:     map[string]string{"metadata.log.max.record.bytes.between.snapshots": "1"},
		NodeProperties: map[int32]map[string]string{1: {"broker.rack": "r1"}, 2: {"broker.rack": "r2"}, 3: {"broker.rack": "r1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	retention := "123456789"
	for _, tc := range []struct {
		name  string
		parts int32
		rf    int16
	}{{"snap-a", 6, 3}, {"snap-b", 3, 2}, {"snap-gone", 2, 1}} {
		res, err := adm.CreateTopic(ctx, tc.parts, tc.rf, map[string]*string{"retention.ms": &retention}, tc.name)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", tc.name, err)
		}
	}
	if res, err := adm.DeleteTopic(ctx, "snap-gone"); err != nil || res.Err != nil {
		t.Fatalf("delete snap-gone: %v %v", err, res.Err)
	}
	brokerSet := func(k, v string) []kadm.AlterConfig { return []kadm.AlterConfig{{Name: k, Value: &v}} }
	resps, err := adm.AlterBrokerConfigs(ctx, brokerSet("log.retention.ms", "3600001"))
	if err := alterErr(t, resps, err); err != nil {
		t.Fatalf("cluster default broker config: %v", err)
	}
	resps, err = adm.AlterBrokerConfigs(ctx, brokerSet("message.max.bytes", "6000"), 2)
	if err := alterErr(t, resps, err); err != nil {
		t.Fatalf("broker 2 config: %v", err)
	}
	if code, msg := alterGroupConfig(t, cl, "snap-group", set("consumer.session.timeout.ms", "50000")); code != 0 {
		t.Fatalf("group config: %d %s", code, msg)
	}
	mustCreateACLs(t, adm, kadm.NewACLs().Topics("snap-a").Operations(kadm.OpRead).Allow("User:alice").AllowHosts("*"))
	scram, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-scram"}})
	if err == nil {
		err = scram.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
	alice := "alice"
	alterQuota(t, adm, kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}, "producer_byte_rate", 1048576)
	features := kmsg.NewPtrUpdateFeaturesRequest()
	features.TimeoutMillis = 10000
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 1, 2 // safe downgrade from 2
	features.FeatureUpdates = append(features.FeatureUpdates, u)
	if fr, err := features.RequestWith(ctx, cl); err != nil || fr.ErrorCode != 0 || fr.Results[0].ErrorCode != 0 {
		t.Fatalf("UpdateFeatures: %v %+v", err, fr)
	}
	initPID := func() int64 {
		t.Helper()
		resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			t.Fatalf("InitProducerID: %v", err)
		}
		return resp.ProducerID
	}
	pid := initPID()

	before := sameImages(t, c, ids)
	if before.Topic("snap-gone") != nil || before.NextProducerID <= pid || before.FeatureLevel("transaction.version") != 1 {
		t.Fatalf("image before the stop: snap-gone %v, next producer id %d after %d, transaction.version %d",
			before.Topic("snap-gone") != nil, before.NextProducerID, pid, before.FeatureLevel("transaction.version"))
	}
	for _, id := range ids {
		n := c.Node(id)
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("node %d's snapshot of offset %d", id, before.Offset), func() bool {
			return samsa.MetadataSnapshotStats(n).Latest.EndOffset > before.Offset
		})
	}
	cl.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("set up and snapshotted in %v; restarting", time.Since(start).Round(time.Millisecond))
	logs.Write([]byte("-- restart --\n"))

	// Every node starts at once: a combined node's start waits for an
	// active controller, which needs a majority.
	errs := make(chan error, len(ids))
	for _, id := range ids {
		go func() { errs <- c.StartNode(ctx, id) }()
	}
	for range ids {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if st := samsa.MetadataSnapshotStats(c.Node(id)); st.Loads != 1 || st.Latest.EndOffset <= before.Offset {
			t.Fatalf("node %d: %d snapshots loaded, newest %s; want one, past offset %d", id, st.Loads, st.Latest.FileName(), before.Offset)
		}
	}
	after := sameImages(t, c, ids)
	wantRecs, wantReplicas, wantBrokers := lasting(before)
	gotRecs, gotReplicas, gotBrokers := lasting(after)
	if !reflect.DeepEqual(gotRecs, wantRecs) {
		t.Fatalf("records after the restart:\n%+v\nwant\n%+v", gotRecs, wantRecs)
	}
	if !reflect.DeepEqual(gotReplicas, wantReplicas) || !reflect.DeepEqual(gotBrokers, wantBrokers) {
		t.Fatalf("replicas %v, brokers %+v after the restart; want %v, %+v", gotReplicas, gotBrokers, wantReplicas, wantBrokers)
	}

	cl, err = kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	if next := initPID(); next <= pid {
		t.Errorf("producer id %d after the restart, %d before", next, pid)
	}
	if tv := finalizedLevel(t, ctx, cl, "transaction.version"); tv != 1 {
		t.Errorf("transaction.version %d after the restart, want 1", tv)
	}
	tcs, err := adm.DescribeTopicConfigs(ctx, "snap-a")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := tcs.On("snap-a", nil); err != nil || !slices.ContainsFunc(v.Configs, func(c kadm.Config) bool { return c.Key == "retention.ms" && c.MaybeValue() == retention }) {
		t.Errorf("snap-a's configs after the restart: %v %+v", err, v.Configs)
	}
	acls, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow("User:alice").AllowHosts("*").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(acls) != 1 || len(acls[0].Described) != 1 {
		t.Errorf("ACLs of alice after the restart: %v %+v", err, acls)
	}
	users, err := adm.DescribeUserSCRAMs(ctx, "alice")
	if err == nil {
		err = users.Error()
	}
	if err != nil || len(users["alice"].CredInfos) != 1 || users["alice"].CredInfos[0].Iterations != 4096 {
		t.Errorf("SCRAM credentials of alice after the restart: %v %+v", err, users)
	}
	quotas, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &alice, MatchType: 0}})
	if err != nil || len(quotas) != 1 || len(quotas[0].Values) != 1 || quotas[0].Values[0].Value != 1048576 {
		t.Errorf("client quotas of alice after the restart: %v %+v", err, quotas)
	}
}
