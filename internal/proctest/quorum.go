package proctest

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/wire"
)

// QuorumLeader asks the broker at addr, within 5 s, which node leads the
// metadata quorum (DescribeQuorum, forwarded to the active controller).
func QuorumLeader(addr string) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := wire.NewClient(addr, "proctest", 16<<20)
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(1)
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	r, err := cl.Request(ctx, req)
	if err != nil {
		return -1, err
	}
	resp := r.(*kmsg.DescribeQuorumResponse)
	if resp.ErrorCode != 0 {
		return -1, kerr.ErrorForCode(resp.ErrorCode)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("malformed DescribeQuorum response")
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return -1, kerr.ErrorForCode(p.ErrorCode)
	}
	return p.LeaderID, nil
}
