package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/server"
)

// DescribeCluster endpoint types (v1+, KIP-919).
const (
	endpointTypeBrokers     int8 = 1
	endpointTypeControllers int8 = 2
)

// DescribeCluster: v0-2
//
// Version notes:
//   - v0: the lowest version served
//   - v1: EndpointType (request), EndpointType (response)
//   - v2: IncludeFencedBrokers (request), IsFenced (response): fenced
//     brokers are listed when asked (KIP-1073)

// DescribeCluster v0-v2 (KIP-700). Broker listeners describe the live
// brokers, and from v2 the fenced ones too when IncludeFencedBrokers asks
// (IsFenced, KIP-1073); controller listeners describe the controllers, the voters of
// the metadata quorum at their controller.quorum.voters addresses, with the
// quorum's leader as the controller id (KIP-919, as kafka-metadata-quorum
// --bootstrap-controller asks; a single node without voters lists none). A
// request for the other endpoint type gets
// MISMATCHED_ENDPOINT_TYPE, an unknown type UNSUPPORTED_ENDPOINT_TYPE, both
// INVALID_REQUEST in v0, as Kafka's AuthHelper.computeDescribeClusterResponse
// answers.
func init() { register(kmsg.DescribeCluster, 0, 2, handleDescribeCluster) }

func handleDescribeCluster(_ context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	want := req.EndpointType
	if req.Version == 0 {
		want = endpointTypeBrokers
	}
	serves := endpointTypeBrokers
	if b.onControllerListener(c) {
		serves = endpointTypeControllers
	}
	resp.EndpointType = serves
	if want != endpointTypeBrokers && want != endpointTypeControllers {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Unsupported endpoint type %d", want))
	} else if want != serves {
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("The request was sent to an endpoint of type %s, but we wanted an endpoint of type %s", endpointTypeName(serves), endpointTypeName(want)))
	}
	if resp.ErrorCode != 0 {
		if req.Version == 0 {
			resp.ErrorCode = kerr.InvalidRequest.Code
		}
		return resp, nil
	}
	im := b.image()
	resp.ClusterID = im.ClusterID
	if serves == endpointTypeControllers {
		resp.ControllerID = -1
		leader := b.ctrl.Leader()
		for _, v := range b.node.QuorumVoters {
			rb := kmsg.NewDescribeClusterResponseBroker()
			rb.NodeID, rb.Host, rb.Port = v.ID, v.Host, int32(v.Port)
			resp.Brokers = append(resp.Brokers, rb)
			if v.ID == leader {
				resp.ControllerID = leader
			}
		}
	} else {
		resp.ControllerID = b.controllerID()
		for _, br := range im.Brokers() {
			if br.Fenced && !req.IncludeFencedBrokers {
				continue
			}
			if ep, ok := clientEndpoint(br, c.Listener); ok {
				rb := kmsg.NewDescribeClusterResponseBroker()
				rb.NodeID, rb.Host, rb.Port, rb.Rack, rb.IsFenced = br.ID, ep.Host, ep.Port, br.Rack, br.Fenced
				resp.Brokers = append(resp.Brokers, rb)
			}
		}
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = b.authorizedOps(c, resCluster, acl.ClusterName)
	}
	return resp, nil
}

// endpointTypeName is Kafka's EndpointType name, for error messages.
func endpointTypeName(t int8) string {
	if t == endpointTypeControllers {
		return "CONTROLLER"
	}
	return "BROKER"
}
