package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/coordinator/group"
	"github.com/samsahq/samsa/internal/server"
)

// JoinGroup (KIP-394 member ids from v4, KIP-345 static members from v5,
// KIP-814 from v9): answered by the group coordinator once the join phase
// of the rebalance completes. Member ids start with the client.id of the
// request header.
func init() { registerGroupAPI(kmsg.JoinGroup, handleJoinGroup) }

func handleJoinGroup(ctx context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	cl := group.Client{ID: clientIDFrom(ctx), Host: clientHost(c.RemoteAddr)}
	return b.groups.coord.JoinGroup(ctx, cl, kreq.(*kmsg.JoinGroupRequest)), nil
}

// registerGroupAPI registers a group API with the versions the coordinator
// implements.
func registerGroupAPI(key kmsg.Key, h handlerFunc) {
	for _, v := range group.APIVersions {
		if v.Key == int16(key) {
			register(key, v.Min, v.Max, h)
			return
		}
	}
	panic("group coordinator does not implement " + key.Name())
}
