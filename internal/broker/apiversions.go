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
	resp.ApiKeys = advertisedKeys(b)
	return resp, nil
}

// advertisedKeys is the version table as ApiVersions advertises it. As
// Kafka 4.0 does (KAFKA-18659), Produce is advertised from v0 although v0-v2
// are rejected when requested: librdkafka before 2.10 enables gzip, snappy
// and lz4 only when the broker's Produce range overlaps v0-v2, and would
// otherwise send every batch uncompressed. Clients pick the highest shared
// version, so none is led to send v0-v2.
func advertisedKeys(b *Broker) []kmsg.ApiVersionsResponseApiKey {
	keys := b.versions.Keys()
	for i := range keys {
		if keys[i].ApiKey == int16(kmsg.Produce) {
			keys[i].MinVersion = 0
		}
	}
	return keys
}

// unsupportedApiVersions answers an ApiVersions request of a version newer
// than supported: UNSUPPORTED_VERSION in the v0 layout with the supported
// ranges, so the client can retry with a version it shares (KIP-511).
func (b *Broker) unsupportedApiVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = advertisedKeys(b)
	return resp
}
