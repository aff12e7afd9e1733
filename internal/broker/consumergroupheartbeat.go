package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/group"
	"github.com/samsahq/samsa/internal/server"
)

// ConsumerGroupHeartbeat: v0-1
//
// Version notes:
//   - v0: the lowest version served (KIP-848)
//   - v1: SubscribedTopicRegex (request); the member id is the client's

// ConsumerGroupHeartbeat (KIP-848): joins, keeps or leaves a member of a
// consumer group; the coordinator assigns partitions (group.consumer.*
// configs) and answers once its records are written.
func init() { registerGroupAPI(kmsg.ConsumerGroupHeartbeat, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	cl := group.Client{ID: clientIDFrom(ctx), Host: clientHost(c.RemoteAddr)}
	return b.groups.coord.ConsumerGroupHeartbeat(ctx, cl, kreq.(*kmsg.ConsumerGroupHeartbeatRequest)), nil
}
