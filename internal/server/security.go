package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/clip"
	"github.com/samsahq/samsa/internal/wire"
)

// SASL is the server side of SASL authentication on a SASL_PLAINTEXT or
// SASL_SSL listener (SaslHandshake v0-v1, SaslAuthenticate v0-v2, KIP-43,
// KIP-152, KIP-368). After a v0 handshake the tokens are exchanged as raw
// size-prefixed frames, as Kafka still serves them.
type SASL struct {
	// Mechanisms are the enabled mechanisms (sasl.enabled.mechanisms), in
	// the order SaslHandshake lists them.
	Mechanisms []string
	// Start begins an exchange of an enabled mechanism.
	Start func(mechanism string) SASLExchange
	// MaxReauth is connections.max.reauth.ms: a session lasts at most this
	// long (or until its credential expires) before the client must
	// re-authenticate; zero means no limit.
	MaxReauth time.Duration
	// MaxReceiveBytes is sasl.server.max.receive.size: the largest frame
	// a connection may send before it has authenticated and while it
	// re-authenticates; a larger one closes the connection before it is
	// read. Zero means DefaultSASLMaxReceiveBytes.
	MaxReceiveBytes int32
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// SASLExchange is one server-side SASL exchange (auth.Exchange).
type SASLExchange interface {
	// Step answers the client's next message; done reports success, an
	// error a failed authentication.
	Step(in []byte) (out []byte, done bool, err error)
	// Principal is "User:NAME" once done.
	Principal() string
	// Expiry is when the credential stops being valid; zero for never.
	Expiry() time.Time
}

// DefaultSASLMaxReceiveBytes is Kafka's default sasl.server.max.receive.size
// (512 KiB): SASL tokens are small, and a client that has not authenticated
// may not make the node read a request of socket.request.max.bytes.
const DefaultSASLMaxReceiveBytes = 512 << 10

// maxReceiveBytes is the largest frame the SASL gate lets an
// unauthenticated connection send.
func (s *SASL) maxReceiveBytes() int32 {
	if s.MaxReceiveBytes > 0 {
		return s.MaxReceiveBytes
	}
	return DefaultSASLMaxReceiveBytes
}

// handshakeTimeout bounds a TLS handshake when no idle timeout is set.
const handshakeTimeout = 10 * time.Second

// startTLS runs the TLS handshake of a TLS listener's connection and, for
// a client certificate, sets the principal from its subject
// (ssl.principal.mapping.rules). On a TLS failure the connection is closed.
func (s *Server) startTLS(nc net.Conn, conn *Conn) (net.Conn, error) {
	tc := tls.Server(nc, s.cfg.TLS)
	d := s.cfg.IdleTimeout
	if d <= 0 {
		d = handshakeTimeout
	}
	ctx, cancel := context.WithTimeout(s.ctx, d)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 && s.cfg.CertificatePrincipal != nil {
		p, err := s.cfg.CertificatePrincipal(certs[0])
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		conn.Principal = p
	}
	return tc, nil
}

// saslState is a connection's place in SASL authentication.
type saslState struct {
	ex            SASLExchange // the exchange begun by the last handshake
	raw           bool         // ex runs over raw frames (SaslHandshake v0)
	authenticated bool
	sessionEnd    time.Time // zero: no limit
}

// errNotAuthenticated closes a connection that sent a request other than
// ApiVersions, SaslHandshake or SaslAuthenticate before authenticating,
// as Kafka's SaslServerAuthenticator does.
var errNotAuthenticated = errors.New("request before SASL authentication")

// errSessionExpired closes a connection whose SASL session ended (KIP-368):
// the client did not re-authenticate in time.
var errSessionExpired = errors.New("SASL session expired (connections.max.reauth.ms): re-authentication required")

// sasl handles the authentication requests of a SASL listener. handled
// reports that resp answers req; closeAfter that the connection closes
// once resp is written; err closes it at once. Requests it does not
// handle go to the Handler.
func (s *Server) sasl(c *Conn, st *saslState, req *wire.Request) (resp kmsg.Response, handled, closeAfter bool, err error) {
	cfg := s.cfg.SASL
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	switch kmsg.Key(req.Key) {
	case kmsg.ApiVersions:
		if st.ex != nil {
			return nil, false, false, fmt.Errorf("%w: ApiVersions during a SASL exchange", errNotAuthenticated)
		}
		return nil, false, false, nil
	case kmsg.SASLHandshake:
		r, ok := req.Body.(*kmsg.SASLHandshakeRequest)
		if !ok {
			return nil, false, false, nil // unsupported version: the Handler answers
		}
		if st.ex != nil {
			return nil, false, false, errors.New("SaslHandshake during a SASL exchange")
		}
		out := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		out.SupportedMechanisms = cfg.Mechanisms
		if !slices.Contains(cfg.Mechanisms, r.Mechanism) {
			out.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return out, true, true, nil
		}
		st.ex = cfg.Start(r.Mechanism)
		// v0: the SASL tokens follow as raw size-prefixed frames, without
		// Kafka headers (kafka-python 2.0 does this); see saslRaw.
		st.raw = r.Version == 0
		return out, true, false, nil
	case kmsg.SASLAuthenticate:
		r, ok := req.Body.(*kmsg.SASLAuthenticateRequest)
		if !ok {
			return nil, false, false, nil
		}
		out := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if st.ex == nil {
			out.ErrorCode = kerr.IllegalSaslState.Code
			msg := "SaslAuthenticate without a SaslHandshake"
			out.ErrorMessage = &msg
			return out, true, true, nil
		}
		ex := st.ex
		st.ex = nil
		fail := func(err error) (kmsg.Response, bool, bool, error) {
			out.ErrorCode = kerr.SaslAuthenticationFailed.Code
			// Kafka's messages start "Authentication failed".
			msg := err.Error()
			msg = strings.ToUpper(msg[:1]) + msg[1:]
			out.ErrorMessage = &msg
			s.logger.Info("failed authentication", "remote", c.RemoteAddr, "err", clip.String(err.Error()))
			return out, true, true, nil
		}
		b, done, err := ex.Step(r.SASLAuthBytes)
		if err != nil {
			return fail(err)
		}
		out.SASLAuthBytes = b
		if !done {
			st.ex = ex
			return out, true, false, nil
		}
		t := now()
		if exp := ex.Expiry(); !exp.IsZero() && !exp.After(t) {
			return fail(errors.New("authentication failed: credential expired"))
		}
		if st.authenticated && ex.Principal() != c.Principal {
			// KIP-368: re-authentication keeps the principal.
			return fail(fmt.Errorf("cannot change principals during re-authentication from %s to %s", c.Principal, ex.Principal()))
		}
		c.Principal = ex.Principal()
		st.authenticated = true
		st.sessionEnd = time.Time{}
		if cfg.MaxReauth > 0 {
			st.sessionEnd = t.Add(cfg.MaxReauth)
		}
		if exp := ex.Expiry(); !exp.IsZero() && (st.sessionEnd.IsZero() || exp.Before(st.sessionEnd)) {
			st.sessionEnd = exp
		}
		if !st.sessionEnd.IsZero() {
			// v1+: the client re-authenticates before this (KIP-368).
			out.SessionLifetimeMillis = max(st.sessionEnd.Sub(t).Milliseconds(), 1)
		}
		return out, true, false, nil
	}
	if !st.authenticated || st.ex != nil {
		return nil, false, false, fmt.Errorf("%w: %s", errNotAuthenticated, kmsg.NameForKey(req.Key))
	}
	if !st.sessionEnd.IsZero() && !now().Before(st.sessionEnd) {
		return nil, false, false, errSessionExpired
	}
	return nil, false, false, nil
}

// certificatePrincipal is the type of Config.CertificatePrincipal.
type certificatePrincipal = func(*x509.Certificate) (string, error)

// saslRaw takes one raw SASL token of the exchange begun by a SaslHandshake
// v0 and returns the raw token to send back. A failure closes the
// connection without an answer, as Kafka does for v0 clients.
func (s *Server) saslRaw(c *Conn, st *saslState, token []byte) ([]byte, error) {
	ex := st.ex
	out, done, err := ex.Step(token)
	if err != nil {
		s.logger.Info("failed authentication", "remote", c.RemoteAddr, "err", clip.String(err.Error()))
		return nil, err
	}
	if !done {
		return out, nil
	}
	now := time.Now
	if s.cfg.SASL.Now != nil {
		now = s.cfg.SASL.Now
	}
	t := now()
	if exp := ex.Expiry(); !exp.IsZero() && !exp.After(t) {
		return nil, errors.New("authentication failed: credential expired")
	}
	if st.authenticated && ex.Principal() != c.Principal {
		return nil, fmt.Errorf("cannot change principals during re-authentication from %s to %s", c.Principal, ex.Principal())
	}
	c.Principal = ex.Principal()
	st.ex, st.raw, st.authenticated = nil, false, true
	// Without SaslAuthenticate there is no session lifetime to tell the
	// client: connections.max.reauth.ms does not apply (as in Kafka).
	st.sessionEnd = time.Time{}
	if exp := ex.Expiry(); !exp.IsZero() {
		st.sessionEnd = exp
	}
	return out, nil
}
