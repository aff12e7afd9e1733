package broker

import (
	"context"
	"path/filepath"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/samsahq/samsa/internal/server"
	"github.com/samsahq/samsa/internal/storage"
)

// DescribeLogDirs: v0-4
//
// Version notes:
//   - v0: the lowest version served
//   - v1: the same fields; the response's throttle time applies after it (KIP-219)
//   - v2: flexible versions (KIP-482)
//   - v3: ErrorCode (response): CLUSTER_AUTHORIZATION_FAILED when denied
//   - v4: TotalBytes and UsableBytes of each directory's volume (KIP-827)

// DescribeLogDirs v0-v4 (KIP-113): this node's log directories (log.dirs)
// and the partitions in each, with their size in bytes (the .log files of
// their segments) and an offset lag of 0 (Samsa keeps no future replicas,
// so IsFuture is false). Topics null describes every partition; a
// partition this node does not host is left out, as Kafka leaves it out.
// v4 adds the volume's total and usable bytes (statfs(2)). A dir an I/O
// error took offline is answered KAFKA_STORAGE_ERROR with no partitions
// (as Kafka's ReplicaManager.describeLogDirs). Needs DESCRIBE
// on the cluster (the gate answers CLUSTER_AUTHORIZATION_FAILED).
// O(hosted partitions).
func init() { register(kmsg.DescribeLogDirs, 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	var want map[storage.TopicPartition]bool
	if req.Topics != nil {
		want = map[storage.TopicPartition]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				want[storage.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	byDir := map[string]map[string][]kmsg.DescribeLogDirsResponseDirTopicPartition{}
	var dirs []string
	for dir := range b.logs.DirectoryIDs() {
		dirs = append(dirs, dir)
		byDir[filepath.Clean(dir)] = map[string][]kmsg.DescribeLogDirsResponseDirTopicPartition{}
	}
	sort.Strings(dirs)
	for tp, l := range b.logs.Logs() {
		if want != nil && !want[tp] {
			continue
		}
		topics := byDir[filepath.Dir(filepath.Clean(l.Dir()))]
		if topics == nil {
			continue
		}
		p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		p.Partition, p.Size = tp.Partition, l.Size()
		topics[tp.Topic] = append(topics[tp.Topic], p)
	}
	offline := b.logs.OfflineDirs()
	for _, dir := range dirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir, rd.TotalBytes, rd.UsableBytes = dir, -1, -1
		if _, ok := offline[dir]; ok {
			rd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil {
			rd.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
			rd.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
		}
		topics := byDir[filepath.Clean(dir)]
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic, rt.Partitions = t, topics[t]
			sort.Slice(rt.Partitions, func(i, j int) bool { return rt.Partitions[i].Partition < rt.Partitions[j].Partition })
			rd.Topics = append(rd.Topics, rt)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return resp, nil
}
