package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/auth"
	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/wire"
)

// principalHandler answers Metadata with the connection's principal in
// ClusterID, and anything else with an empty response.
var principalHandler = handlerFunc(func(_ context.Context, c *Conn, req *wire.Request) (kmsg.Response, error) {
	r := req.Body.ResponseKind()
	if m, ok := r.(*kmsg.MetadataResponse); ok {
		p := c.Principal
		m.ClusterID = &p
	}
	return r, nil
})

func secureVersions() *wire.Versions {
	v := versions()
	v.Add(kmsg.SASLHandshake, 1, 1)
	v.Add(kmsg.SASLAuthenticate, 0, 2)
	return v
}

func principalOf(t *testing.T, c net.Conn, id int32) (string, error) {
	t.Helper()
	m := kmsg.NewPtrMetadataRequest()
	m.SetVersion(9)
	resp, err := send(t, c, m, id)
	if err != nil {
		return "", err
	}
	return *resp.(*kmsg.MetadataResponse).ClusterID, nil
}

// TestTLSClientCertificatePrincipal: on a TLS listener with a client
// certificate the principal is its subject mapped by
// ssl.principal.mapping.rules; without one (ssl.client.auth=requested) it
// stays ANONYMOUS.
func TestTLSClientCertificatePrincipal(t *testing.T) {
	ca, err := auth.NewDevCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serverKS, _ := ca.Issue(pkix.Name{CommonName: "localhost"}, []string{"127.0.0.1"}, time.Hour)
	clientKS, _ := ca.Issue(pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"eng"}}, nil, time.Hour)
	tc, err := auth.ServerTLS(config.SSL{KeystoreCertificateChain: string(serverKS), KeystoreKey: string(serverKS), TruststoreCertificates: string(ca.CertPEM()), ClientAuth: "requested"})
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := auth.ParsePrincipalMappingRules(`RULE:^CN=([^,]+),OU=eng$/$1/L,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen(Config{Name: "SSL", Addr: "127.0.0.1:0", Handler: principalHandler, Versions: versions(), TLS: tc, CertificatePrincipal: mapper.CertificatePrincipal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cert, err := tls.X509KeyPair(clientKS, clientKS)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		certs []tls.Certificate
		want  string
	}{{[]tls.Certificate{cert}, "User:alice"}, {nil, AnonymousPrincipal}} {
		c, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{RootCAs: roots, Certificates: tc.certs})
		if err != nil {
			t.Fatal(err)
		}
		got, err := principalOf(t, c, 1)
		c.Close()
		if err != nil || got != tc.want {
			t.Fatalf("principal %q, %v; want %q", got, err, tc.want)
		}
	}
	// A plaintext client on the TLS port gets no Kafka answer.
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := principalOf(t, c, 1); err == nil {
		t.Fatal("plaintext request answered on a TLS listener")
	}
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeClock) add(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func saslListen(t *testing.T, clock *fakeClock) *Server {
	t.Helper()
	a, err := auth.NewAuthenticator(config.SASL{EnabledMechanisms: []string{"PLAIN"}, JAAS: map[string]string{"PLAIN": `m required user_alice="a" user_bob="b";`}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen(Config{Name: "SASL_PLAINTEXT", Addr: "127.0.0.1:0", Handler: principalHandler, Versions: secureVersions(),
		SASL: &SASL{Mechanisms: a.Mechanisms(), Start: func(m string) SASLExchange { ex, _ := a.Start(m); return ex }, MaxReauth: time.Minute, Now: clock.Now}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func authenticate(t *testing.T, c net.Conn, mech, msg string, id int32) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	h := kmsg.NewPtrSASLHandshakeRequest()
	h.SetVersion(1)
	h.Mechanism = mech
	resp, err := send(t, c, h, id)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		t.Fatalf("handshake: %v", kerr.ErrorForCode(code))
	}
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.SetVersion(2)
	a.SASLAuthBytes = []byte(msg)
	ar, err := send(t, c, a, id+1)
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return ar.(*kmsg.SASLAuthenticateResponse)
}

// TestSASLSessionLifetime: SaslAuthenticate v1+ tells the session lifetime
// (connections.max.reauth.ms); re-authenticating as the same user renews
// the session, as another user fails and closes the connection (KIP-368),
// and a request after the session ended closes the connection.
func TestSASLSessionLifetime(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	s := saslListen(t, clock)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := authenticate(t, c, "PLAIN", "\x00alice\x00a", 1); r.ErrorCode != 0 || r.SessionLifetimeMillis != 60000 {
		t.Fatalf("authenticate: %v, lifetime %d", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis)
	}
	if p, err := principalOf(t, c, 3); err != nil || p != "User:alice" {
		t.Fatalf("principal %q %v", p, err)
	}
	clock.add(50 * time.Second)
	if r := authenticate(t, c, "PLAIN", "\x00alice\x00a", 4); r.ErrorCode != 0 || r.SessionLifetimeMillis != 60000 {
		t.Fatalf("re-authenticate: %v, lifetime %d", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis)
	}
	clock.add(50 * time.Second) // 100 s after the first, 50 s after the second
	if p, err := principalOf(t, c, 6); err != nil || p != "User:alice" {
		t.Fatalf("after re-authentication: %q %v", p, err)
	}
	clock.add(11 * time.Second)
	if _, err := principalOf(t, c, 7); !closedByServer(err) {
		t.Fatalf("request after the session ended: %v, want the connection closed", err)
	}

	c2, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	authenticate(t, c2, "PLAIN", "\x00alice\x00a", 1)
	if r := authenticate(t, c2, "PLAIN", "\x00bob\x00b", 3); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authenticating as another user: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if _, err := principalOf(t, c2, 5); !closedByServer(err) {
		t.Fatalf("after a failed re-authentication: %v, want the connection closed", err)
	}
}

// TestSASLUnauthenticatedRequests: before authenticating a connection may
// send ApiVersions; Metadata closes it; an unknown mechanism is answered
// UNSUPPORTED_SASL_MECHANISM with the enabled ones, then the connection
// closes; SaslAuthenticate without a handshake is ILLEGAL_SASL_STATE.
func TestSASLUnauthenticatedRequests(t *testing.T) {
	s := saslListen(t, &fakeClock{now: time.Now()})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := dial()
	av := kmsg.NewPtrApiVersionsRequest()
	if _, err := send(t, c, av, 1); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	if _, err := principalOf(t, c, 2); !closedByServer(err) {
		t.Fatalf("Metadata before authenticating: %v", err)
	}

	c = dial()
	h := kmsg.NewPtrSASLHandshakeRequest()
	h.SetVersion(1)
	h.Mechanism = "GSSAPI"
	resp, err := send(t, c, h, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(r.SupportedMechanisms) != 1 || r.SupportedMechanisms[0] != "PLAIN" {
		t.Fatalf("unknown mechanism: %+v", r)
	}
	if _, err := send(t, c, av, 2); !closedByServer(err) {
		t.Fatalf("after UNSUPPORTED_SASL_MECHANISM: %v", err)
	}

	c = dial()
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.SetVersion(1)
	resp, err = send(t, c, a, 1)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.SASLAuthenticateResponse).ErrorCode; code != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate without a handshake: %v", kerr.ErrorForCode(code))
	}
}

// TestSASLMaxReceiveSize: before authenticating, a frame larger than
// sasl.server.max.receive.size closes the connection once its size is
// read, before its body is; once authenticated, socket.request.max.bytes
// applies again (Kafka's SaslServerAuthenticator).
func TestSASLMaxReceiveSize(t *testing.T) {
	s := saslListen(t, &fakeClock{now: time.Now()})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A SaslHandshake frame announcing 1 MiB: only its size and header are
	// sent, so a server that waits for the body never closes.
	var hdr [14]byte
	binary.BigEndian.PutUint32(hdr[:], DefaultSASLMaxReceiveBytes+1)
	binary.BigEndian.PutUint16(hdr[4:], uint16(kmsg.SASLHandshake))
	binary.BigEndian.PutUint16(hdr[6:], 1)
	binary.BigEndian.PutUint32(hdr[8:], 1)
	binary.BigEndian.PutUint16(hdr[12:], 0xffff)
	if _, err := c.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !closedByServer(err) {
		t.Fatalf("oversized frame before authenticating: %v, want the connection closed", err)
	}

	c2, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if r := authenticate(t, c2, "PLAIN", "\x00alice\x00a", 1); r.ErrorCode != 0 {
		t.Fatalf("authenticate: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	m := kmsg.NewPtrMetadataRequest()
	m.SetVersion(9)
	m.Topics = make([]kmsg.MetadataRequestTopic, 1)
	big := strings.Repeat("t", DefaultSASLMaxReceiveBytes)
	m.Topics[0].Topic = &big
	if _, err := send(t, c2, m, 3); err != nil {
		t.Fatalf("large request after authenticating: %v", err)
	}
}

// closedByServer reports whether err is what reading a connection the
// server closed gives: EOF, or ECONNRESET when the server closed it with a
// request of ours still unread in its receive buffer (the kernel then
// resets the connection).
func closedByServer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}
