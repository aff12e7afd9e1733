// Package auth authenticates Kafka connections: TLS configurations built
// from Kafka's PEM ssl.* properties (KIP-651) with certificate reload,
// principals from client certificates (ssl.principal.mapping.rules), and
// the server side of the SASL mechanisms PLAIN (RFC 4616), SCRAM-SHA-256
// and SCRAM-SHA-512 (RFC 5802, RFC 7677, KIP-84) and OAUTHBEARER (RFC 7628,
// KIP-255) that server.Server runs during SaslAuthenticate exchanges. It
// also holds the client side this node uses to dial other nodes over
// secured listeners.
//
// Principals are Kafka's "User:NAME" strings (server.Conn.Principal).
package auth
