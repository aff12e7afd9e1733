package broker

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// The gates of the share group APIs, with the checks and codes of Kafka's
// KafkaApis (handleShareGroupHeartbeat, handleShareGroupDescribe).
// ShareFetch and ShareAcknowledge check READ on the group and on each
// topic in their handlers, and DescribeShareGroupOffsets DESCRIBE on the
// group and topics.
func init() {
	gates[kmsg.ShareGroupHeartbeat] = gateShareGroupHeartbeat
	gates[kmsg.ShareGroupDescribe] = gateShareGroupDescribe
}

// gateShareGroupHeartbeat: READ on the group, else
// GROUP_AUTHORIZATION_FAILED; then DESCRIBE on every subscribed topic, else
// TOPIC_AUTHORIZATION_FAILED naming those denied.
func gateShareGroupHeartbeat(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	if code, msg := b.heartbeatDenied(c, req.GroupID, req.SubscribedTopicNames); code != 0 {
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return deny(resp)
	}
	return noGate(req)
}

// heartbeatDenied is the check of ConsumerGroupHeartbeat and
// ShareGroupHeartbeat: READ on the group, then DESCRIBE on every topic
// subscribed by name; it returns the error code and message (0: allowed).
func (b *Broker) heartbeatDenied(c *server.Conn, group string, topics []string) (int16, *string) {
	if !b.authorized(c, opRead, resGroup, group) {
		return kerr.GroupAuthorizationFailed.Code, nil
	}
	var denied []string
	for _, t := range topics {
		if !b.authorized(c, opDescribe, resTopic, t) {
			denied = append(denied, t)
		}
	}
	if len(denied) > 0 {
		msg := fmt.Sprintf("The client is not authorized to describe topics: %s", strings.Join(denied, ", "))
		return kerr.TopicAuthorizationFailed.Code, &msg
	}
	return 0, nil
}

// gateShareGroupDescribe: DESCRIBE on each group (else its entry is
// GROUP_AUTHORIZATION_FAILED), and the authorized operations when asked.
func gateShareGroupDescribe(b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Request, func(kmsg.Response) kmsg.Response) {
	req := kreq.(*kmsg.ShareGroupDescribeRequest)
	out := *req
	var finish func(kmsg.Response) kmsg.Response
	out.GroupIDs, finish = gateGroupsDescribed(b, c, req.GroupIDs, req.IncludeAuthorizedOperations,
		func(r kmsg.Response) *[]kmsg.ShareGroupDescribeResponseGroup {
			return &r.(*kmsg.ShareGroupDescribeResponse).Groups
		},
		func(g *kmsg.ShareGroupDescribeResponseGroup) (string, int16, *int32) {
			return g.GroupID, g.ErrorCode, &g.AuthorizedOperations
		},
		func(name string, code int16) kmsg.ShareGroupDescribeResponseGroup {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = name, code
			return g
		})
	return &out, finish
}
