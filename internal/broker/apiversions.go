package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/server"
)

// ApiVersions: v0-3
//
// Version notes:
//   - v0: the lowest version served
//   - v1: ThrottleMillis (response)
//   - v2: throttle_time_ms returned before the throttle, which clients apply
//     themselves (KIP-219)
//   - v3: flexible versions: compact encodings and tagged fields (KIP-482),
//     ClientSoftwareName (request), ClientSoftwareVersion (request)

// ApiVersions v0-v3 (KIP-35, KIP-511). Each listener advertises what it
// serves: broker listeners the client APIs, controller listeners only the
// controller's (see controllerListenerAPIs), as Kafka's ApiVersionManager
// does per listener type.
func init() { register(kmsg.ApiVersions, 0, 3, handleApiVersions) }

// controllerListenerAPIs are the APIs served on controller listeners as well
// as on broker listeners, those of Samsa's whose request schema lists the
// "controller" listener in Kafka (clients/src/main/resources/common/message,
// dispatched by ControllerApis): ApiVersions; Fetch, of __cluster_metadata
// only (observers, KIP-595); DescribeQuorum; DescribeConfigs and
// DescribeCluster (KIP-919); DescribeAcls; and the admin requests brokers forward to the
// active controller (forwarded, KIP-590), which admin clients also send to
// controllers with bootstrap.controllers (KIP-919). The
// broker-to-controller APIs (registerController) are served on controller
// listeners only. Any other request on a controller listener closes the
// connection, as Kafka's SocketServer does ("Received request api key ...
// which is not enabled").
var controllerListenerAPIs = func() map[kmsg.Key]bool {
	m := map[kmsg.Key]bool{
		kmsg.ApiVersions:     true,
		kmsg.Fetch:           true,
		kmsg.DescribeQuorum:  true,
		kmsg.DescribeConfigs: true,
		kmsg.DescribeCluster: true,
		// Controller listeners may be SASL listeners (KIP-631).
		kmsg.SASLHandshake:    true,
		kmsg.SASLAuthenticate: true,
		kmsg.DescribeACLs:     true,
	}
	for k := range forwarded {
		m[k] = true
	}
	return m
}()

func handleApiVersions(_ context.Context, b *Broker, c *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = b.advertisedKeys(c)
	b.features(resp)
	return resp, nil
}

// ShareVersion is the level of the share.version feature (KIP-932's
// feature flag): 1 enables share groups, finalized in Kafka 4.2 (a preview
// in 4.1).
const ShareVersion = 1

// features sets the feature flags of an ApiVersions v3+ response (KIP-584;
// tagged fields, not sent before v3), with the metadata log offset as the
// finalized features epoch, as Kafka brokers report them:
//   - share.version supported from 0 to 1 and always finalized at 1;
//   - transaction.version supported from 0 to 2 and finalized at the level
//     of the metadata log (FeatureLevelRecord; 2 for a new cluster, set by
//     storage format --feature or UpdateFeatures): with 2, clients run
//     transactions under KIP-890 part 2 (EndTxn v5, Produce v12,
//     TxnOffsetCommit v5).
//
// Samsa's other behaviours have no feature flag (metadata.version and
// group.version are not reported).
func (b *Broker) features(resp *kmsg.ApiVersionsResponse) {
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = "share.version", 0, ShareVersion
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "share.version", ShareVersion, ShareVersion
	resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{sf}
	resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{ff}
	resp.FinalizedFeaturesEpoch = 0
	im := b.image()
	if im != nil {
		resp.FinalizedFeaturesEpoch = max(im.Offset, 0)
	}
	for _, f := range metadata.SupportedFeatures {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.Name, f.Min, f.Max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		if im == nil {
			continue
		}
		if l := im.FeatureLevel(f.Name); l > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.Name, l, l
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
}

// advertisedKeys is the version table ApiVersions advertises on c's
// listener. As Kafka 4.0 does (KAFKA-18659), broker listeners advertise
// Produce from v0 although v0-v2 are rejected when requested: librdkafka
// before 2.10 enables gzip, snappy and lz4 only when the broker's Produce
// range overlaps v0-v2, and would otherwise send every batch uncompressed.
// Clients pick the highest shared version, so none is led to send v0-v2.
func (b *Broker) advertisedKeys(c *server.Conn) []kmsg.ApiVersionsResponseApiKey {
	if b.onControllerListener(c) {
		return b.ctrlVers.Keys()
	}
	keys := b.versions.Keys()
	for i := range keys {
		if keys[i].ApiKey == int16(kmsg.Produce) {
			keys[i].MinVersion = 0
		}
	}
	return keys
}

// onControllerListener reports whether c came in on a controller listener
// (controller.listener.names); nil is a broker listener.
func (b *Broker) onControllerListener(c *server.Conn) bool {
	return c != nil && b.node.IsControllerListener(c.Listener)
}

// unsupportedApiVersions answers an ApiVersions request of a version newer
// than supported: UNSUPPORTED_VERSION in the v0 layout with the ranges
// supported on c's listener, so the client can retry with a version it
// shares (KIP-511).
func (b *Broker) unsupportedApiVersions(c *server.Conn) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = b.advertisedKeys(c)
	return resp
}
