package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// The gates of the KIP-848 consumer group APIs, with the checks and codes
// of Kafka's KafkaApis.handleConsumerGroupHeartbeat and
// handleConsumerGroupDescribe.
func init() {
	gates[kmsg.ConsumerGroupHeartbeat] = gateConsumerGroupHeartbeat
	gates[kmsg.ConsumerGroupDescribe] = gateConsumerGroupDescribe
}

// gateConsumerGroupHeartbeat: READ on the group, else
// GROUP_AUTHORIZATION_FAILED; then DESCRIBE on every topic the member
// subscribes to by name, else TOPIC_AUTHORIZATION_FAILED naming those
// denied. Nothing reaches the coordinator when either fails.
func gateConsumerGroupHeartbeat(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	if code, msg := b.heartbeatDenied(c, req.Group, req.SubscribedTopicNames); code != 0 {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return deny(resp)
	}
	return noGate(req)
}

// gateConsumerGroupDescribe: DESCRIBE on each group (else the group's
// entry is GROUP_AUTHORIZATION_FAILED), and the authorized operations
// (KIP-430) when asked.
func gateConsumerGroupDescribe(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	out := *req
	out.Groups = nil
	var denied []string
	for _, g := range req.Groups {
		if b.authorized(c, opDescribe, resGroup, g) {
			out.Groups = append(out.Groups, g)
		} else {
			denied = append(denied, g)
		}
	}
	return &out, func(r kmsg.Response) kmsg.Response {
		resp := r.(*kmsg.ConsumerGroupDescribeResponse)
		if req.IncludeAuthorizedOperations {
			for i := range resp.Groups {
				if resp.Groups[i].ErrorCode == 0 {
					resp.Groups[i].AuthorizedOperations = b.authorizedOps(c, resGroup, resp.Groups[i].Group)
				}
			}
		}
		for _, g := range denied {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
}
