package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// ApiVersions v0-v3 (KIP-35, KIP-511).
func init() { register(kmsg.ApiVersions, 0, 3, handleApiVersions) }

func handleApiVersions(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = b.versions.Keys()
	return resp, nil
}

// unsupportedApiVersions answers an ApiVersions request of a version newer
// than supported: UNSUPPORTED_VERSION in the v0 layout with the supported
// ranges, so the client can retry with a version it shares (KIP-511).
func (b *Broker) unsupportedApiVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = b.versions.Keys()
	return resp
}
