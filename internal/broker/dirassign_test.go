package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
)

// FuzzAssignReplicasToDirs decodes arbitrary AssignReplicasToDirs v0
// bodies as the controller listener does and answers them: never a
// panic, and the answer names every partition of the request once, in
// its order (the errors are matched by position).
func FuzzAssignReplicasToDirs(f *testing.F) {
	req := kmsg.NewPtrAssignReplicasToDirsRequest()
	req.BrokerID, req.BrokerEpoch = 2, 17
	for _, dir := range [][16]byte{controller.DirectoryLost, {9, 9}} {
		d := kmsg.NewAssignReplicasToDirsRequestDirectory()
		d.ID = dir
		tp := kmsg.NewAssignReplicasToDirsRequestDirectoryTopic()
		tp.TopicID = [16]byte{1, 2, 3}
		for _, p := range []int32{0, 7, -1} {
			pp := kmsg.NewAssignReplicasToDirsRequestDirectoryTopicPartition()
			pp.Partition = p
			tp.Partitions = append(tp.Partitions, pp)
		}
		d.Topics = append(d.Topics, tp)
		req.Directories = append(req.Directories, d)
	}
	f.Add(req.AppendTo(nil))
	f.Add(kmsg.NewPtrAssignReplicasToDirsRequest().AppendTo(nil))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, body []byte) {
		r := kmsg.NewPtrAssignReplicasToDirsRequest()
		if err := r.ReadFrom(body); err != nil {
			return
		}
		items := dirAssignments(r)
		errs := make([]error, len(items))
		for i := range errs {
			if i%2 == 1 {
				errs[i] = controller.ErrNotReplica
			}
		}
		resp := dirAssignmentsResponse(r, errs, nil)
		i := 0
		for _, d := range resp.Directories {
			for _, tp := range d.Topics {
				for _, p := range tp.Partitions {
					if i >= len(items) || p.Partition != items[i].Partition || tp.TopicID != items[i].TopicID || d.ID != items[i].Dir {
						t.Fatalf("answer %d does not match the request", i)
					}
					if (p.ErrorCode != 0) != (i%2 == 1) {
						t.Fatalf("answer %d: error code %d", i, p.ErrorCode)
					}
					i++
				}
			}
		}
		if i != len(items) {
			t.Fatalf("%d answers for %d partitions", i, len(items))
		}
		if whole := dirAssignmentsResponse(r, nil, errors.New("x")); whole.ErrorCode == 0 || len(whole.Directories) != 0 {
			t.Fatalf("a request-wide error: %+v", whole)
		}
		resp.AppendTo(nil)
	})
}
