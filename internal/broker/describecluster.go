package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// DescribeCluster v0-v1 (KIP-700).
func init() { register(kmsg.DescribeCluster, 0, 1, handleDescribeCluster) }

func handleDescribeCluster(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	im := b.image()
	resp.ClusterID = im.ClusterID
	resp.ControllerID = b.controllerID()
	resp.EndpointType = 1 // brokers
	for _, br := range im.Brokers() {
		if br.Fenced {
			continue
		}
		if ep, ok := clientEndpoint(br); ok {
			rb := kmsg.NewDescribeClusterResponseBroker()
			rb.NodeID, rb.Host, rb.Port, rb.Rack = br.ID, ep.Host, ep.Port, br.Rack
			resp.Brokers = append(resp.Brokers, rb)
		}
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = 1<<4 | 1<<6 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
	}
	return resp, nil
}
