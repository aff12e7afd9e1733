// Package wire frames Kafka requests and responses on a connection.
//
// # Framing
//
// Every request and response is a frame: a 4-byte big-endian size followed
// by that many bytes. A request frame starts with the request header:
//
//	v1: api_key int16, api_version int16, correlation_id int32,
//	    client_id nullable string (int16 length, -1 = null)
//	v2: v1 followed by tagged fields (flexible versions, KIP-482)
//
// A response frame starts with the response header: correlation_id int32,
// followed in flexible versions by tagged fields — except ApiVersions,
// whose response header is always v0 so that a client can read it before
// it knows the broker's versions.
//
// Body encoding and decoding are franz-go's kmsg.
package wire
