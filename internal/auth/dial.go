package auth

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/wire"
)

// Dialer returns how this node connects, as a client, to a listener of
// another node with security sec: TLS with the listener's own ssl.*
// properties (the truststore verifies the peer, the keystore is the client
// certificate, as Kafka uses one listener's configs for both sides), then,
// on a SASL listener, SaslHandshake and SaslAuthenticate with mechanism
// (sasl.mechanism.inter.broker.protocol or
// sasl.mechanism.controller.protocol) and the username and password of the
// listener's <mechanism>.sasl.jaas.config. PLAIN and SCRAM are served;
// other mechanisms are an error naming the property. A PLAINTEXT listener
// gives nil (plain TCP).
func Dialer(sec *config.ListenerSecurity, mechanism, clientID string) (wire.DialFunc, error) {
	if sec == nil || sec.Protocol == "PLAINTEXT" {
		return nil, nil
	}
	var tc *tls.Config
	if sec.TLS() {
		var err error
		if tc, err = ClientTLS(sec.SSL, ""); err != nil {
			return nil, fmt.Errorf("listener %s (client side): %w", sec.Listener, err)
		}
	}
	var mech sasl.Mechanism
	if sec.SASLEnabled() {
		opts, err := ParseJAAS(sec.SASL.JAAS[mechanism])
		if err != nil {
			return nil, fmt.Errorf("listener.name.%s.%s.sasl.jaas.config: %w", lower(sec.Listener), lower(mechanism), err)
		}
		user, pass := opts["username"], opts["password"]
		if user == "" || pass == "" {
			return nil, fmt.Errorf("listener.name.%s.%s.sasl.jaas.config: username and password are needed for this node to authenticate to others", lower(sec.Listener), lower(mechanism))
		}
		if mechanism == "OAUTHBEARER" {
			return nil, fmt.Errorf("listener %s: inter-node SASL mechanism OAUTHBEARER is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", sec.Listener)
		}
		if mech, err = ClientMechanism(mechanism, user, pass, ""); err != nil {
			return nil, fmt.Errorf("listener %s: inter-node %w", sec.Listener, err)
		}
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if tc != nil {
			c := tc.Clone()
			if c.ServerName == "" {
				c.ServerName, _, _ = net.SplitHostPort(addr)
			}
			tconn := tls.Client(conn, c)
			if err := tconn.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
			}
			conn = tconn
		}
		if mech != nil {
			if err := Authenticate(ctx, conn, addr, clientID, mech); err != nil {
				conn.Close()
				return nil, err
			}
		}
		return conn, nil
	}, nil
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ErrSASLFailed is a SASL exchange this node started that the peer
// refused.
var ErrSASLFailed = errors.New("sasl authentication to peer failed")

// Authenticate runs the client side of a SASL exchange on conn: SaslHandshake
// v1, then SaslAuthenticate v1 until mech is done. The context's deadline
// (else one minute) bounds it; conn's deadline is cleared after.
func Authenticate(ctx context.Context, conn net.Conn, addr, clientID string, mech sasl.Mechanism) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	corr := int32(0)
	roundTrip := func(req kmsg.Request) (kmsg.Response, error) {
		corr++
		if _, err := conn.Write(f.AppendRequest(nil, req, corr)); err != nil {
			return nil, err
		}
		body, err := wire.ReadFrame(conn, nil, 1<<20)
		if err != nil {
			return nil, err
		}
		if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != corr {
			return nil, fmt.Errorf("%w: bad correlation id from %s", ErrSASLFailed, addr)
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		return resp, resp.ReadFrom(body[4:])
	}
	h := kmsg.NewPtrSASLHandshakeRequest()
	h.SetVersion(1)
	h.Mechanism = mech.Name()
	r, err := roundTrip(h)
	if err != nil {
		return fmt.Errorf("SaslHandshake with %s: %w", addr, err)
	}
	if code := r.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return fmt.Errorf("%w: SaslHandshake %s with %s: %v", ErrSASLFailed, mech.Name(), addr, kerr.ErrorForCode(code))
	}
	host, _, _ := net.SplitHostPort(addr)
	session, msg, err := mech.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for {
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.SetVersion(1)
		a.SASLAuthBytes = msg
		r, err := roundTrip(a)
		if err != nil {
			return fmt.Errorf("SaslAuthenticate with %s: %w", addr, err)
		}
		ar := r.(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != 0 {
			detail := ""
			if ar.ErrorMessage != nil {
				detail = ": " + *ar.ErrorMessage
			}
			return fmt.Errorf("%w: %s with %s: %v%s", ErrSASLFailed, mech.Name(), addr, kerr.ErrorForCode(ar.ErrorCode), detail)
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("%w: %s with %s: %v", ErrSASLFailed, mech.Name(), addr, err)
		}
		if done {
			return nil
		}
		msg = next
	}
}

// ClientMechanism is franz-go's client side of a SASL mechanism: PLAIN and
// SCRAM with user and pass, OAUTHBEARER with token.
func ClientMechanism(mechanism, user, pass, token string) (sasl.Mechanism, error) {
	switch mechanism {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	case "OAUTHBEARER":
		return oauth.Auth{Token: token}.AsMechanism(), nil
	}
	return nil, fmt.Errorf("SASL mechanism %s is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", mechanism)
}
