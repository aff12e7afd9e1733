package broker

import (
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
	var finish func(kmsg.Response) kmsg.Response
	out.Groups, finish = gateGroupsDescribed(b, c, req.Groups, req.IncludeAuthorizedOperations,
		func(r kmsg.Response) *[]kmsg.ConsumerGroupDescribeResponseGroup {
			return &r.(*kmsg.ConsumerGroupDescribeResponse).Groups
		},
		func(g *kmsg.ConsumerGroupDescribeResponseGroup) (string, int16, *int32) {
			return g.Group, g.ErrorCode, &g.AuthorizedOperations
		},
		func(name string, code int16) kmsg.ConsumerGroupDescribeResponseGroup {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = name, code
			return g
		})
	return &out, finish
}
