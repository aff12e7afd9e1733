package conformance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestSecurityListenersBoundByServer starts a scenario server whose
// secured listeners' ports are taken by another process the moment
// NewSecurity returns (as any outgoing connection on a busy machine may
// take a port that was probed free and closed): the server must start
// anyway, and Bound must name the listeners it bound. A probed port taken
// before the server bound it failed the server's start, and with it every
// scenario of that client's row.
func TestSecurityListenersBoundByServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a samsa server: not in -short")
	}
	tmp := t.TempDir()
	bin := *flagSamsa
	if bin == "" {
		var err error
		if bin, err = BuildSamsa(context.Background(), "..", tmp); err != nil {
			t.Fatal(err)
		}
	}
	sec, err := NewSecurity(filepath.Join(tmp, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{sec.SASLSSLPort, sec.SSLPort} {
		if p == 0 {
			continue // the server picks it
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // taken already: the server cannot have it either
		}
		defer l.Close()
	}
	srv, err := StartServer(bin, filepath.Join(tmp, "data"), append(append([]string{}, ServerOverrides...), sec.Overrides()...)...)
	if err != nil {
		t.Fatalf("the server did not start: %v", err)
	}
	defer srv.Stop(10 * time.Second)
	if err := sec.Bound(srv.Logs()); err != nil {
		t.Fatal(err)
	}
	// The SASL_SSL port is the server's: a TLS handshake verifies its
	// certificate against the scenario CA.
	ca, err := os.ReadFile(sec.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no certificate in the CA file")
	}
	bootstrap, _ := sec.RunnerArgs("SASL_SSL")
	d := &net.Dialer{Timeout: 30 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", bootstrap, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS handshake with the SASL_SSL listener %s: %v", bootstrap, err)
	}
	c.Close()
}
