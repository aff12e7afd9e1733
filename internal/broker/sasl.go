package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/server"
)

// SASLHandshake: v0-1
//
// Version notes:
//   - v0: the SASL tokens follow as raw size-prefixed frames, without
//     SaslAuthenticate (kafka-python 2.0); kept by Kafka 4.0 (KIP-896), and
//     librdkafka enables SASL only when the range includes v0
//   - v1: the handshake before SaslAuthenticate (KIP-152)

// SASLAuthenticate: v0-2
//
// Version notes:
//   - v0: the lowest version served
//   - v1: SessionLifetimeMillis (response, KIP-368)
//   - v2: flexible versions: compact encodings and tagged fields (KIP-482)

// SaslHandshake and SaslAuthenticate (KIP-43, KIP-152) are answered by the
// server package on SASL listeners (server.SASL). These handlers see them
// only on other listeners, or once a SASL connection is authenticated and
// sends SaslAuthenticate without a new handshake, and answer
// ILLEGAL_SASL_STATE, as Kafka's KafkaApis does.
func init() {
	register(kmsg.SASLHandshake, 0, 1, handleSASLHandshake)
	register(kmsg.SASLAuthenticate, 0, 2, handleSASLAuthenticate)
}

func handleSASLHandshake(_ context.Context, _ *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := kreq.(*kmsg.SASLHandshakeRequest).ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return resp, nil
}

func handleSASLAuthenticate(_ context.Context, _ *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := kreq.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate request received after successful authentication, or on a listener without SASL"
	resp.ErrorMessage = &msg
	return resp, nil
}
