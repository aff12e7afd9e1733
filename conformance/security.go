package conformance

import (
	"context"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/auth"
)

// The security scenarios' user, password and certificate subject. The
// SCRAM user is created by each scenario's setup over the PLAINTEXT
// listener, whose ANONYMOUS principal is a super user.
const (
	ScramUser     = "conformance"
	ScramPassword = "conformance-secret"
	// MTLSPrincipal is the principal of the client certificate (CN
	// conformance-mtls) under Kafka's default ssl.principal.mapping.rules.
	MTLSPrincipal = "User:CN=conformance-mtls"
)

// Security is the PKI of one scenario server: a development CA, the
// server's PEM keystore, and a client certificate and key in separate
// files (as librdkafka, Python's ssl and Node's tls want them).
type Security struct {
	CA, ServerKeystore, ClientCert, ClientKey string
	// SASLSSLPort and SSLPort are the server's SASL_SSL (SCRAM-SHA-512)
	// and SSL (client certificate required) listeners' ports, which the
	// server picks (Overrides asks for port 0) and Bound reads from its
	// log; 0 until then.
	SASLSSLPort, SSLPort int
}

// NewSecurity writes the PKI under dir.
func NewSecurity(dir string) (*Security, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ca, err := auth.NewDevCA("samsa conformance CA", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	s := &Security{CA: filepath.Join(dir, "ca.pem"), ServerKeystore: filepath.Join(dir, "server.pem"),
		ClientCert: filepath.Join(dir, "client-cert.pem"), ClientKey: filepath.Join(dir, "client-key.pem")}
	server, err := ca.Issue(pkix.Name{CommonName: "localhost"}, []string{"localhost", "127.0.0.1"}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	client, err := ca.Issue(pkix.Name{CommonName: "conformance-mtls"}, nil, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	var certPEM, keyPEM []byte
	for rest := client; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if strings.Contains(b.Type, "PRIVATE KEY") {
			keyPEM = append(keyPEM, pem.EncodeToMemory(b)...)
		} else {
			certPEM = append(certPEM, pem.EncodeToMemory(b)...)
		}
	}
	for path, data := range map[string][]byte{s.CA: ca.CertPEM(), s.ServerKeystore: server, s.ClientCert: certPEM, s.ClientKey: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Overrides are the server's --override pairs for s: PLAINTEXT (the
// driver's, ANONYMOUS is a super user), SASL_SSL and SSL listeners, with
// Kafka's StandardAuthorizer on. Every listener asks for port 0: a port
// probed free and closed before the server starts can be taken meanwhile
// (by any process's outgoing connection on a busy machine), which fails
// the server's start with "address already in use".
func (s *Security) Overrides() []string {
	return []string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + s.ServerKeystore,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + s.CA,
		"listener.name.ssl.ssl.client.auth=required",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:ANONYMOUS",
	}
}

// listeningRE matches the server's log line for a bound listener (samsa.go:
// msg=listening listener=NAME addr=HOST:PORT).
var listeningRE = regexp.MustCompile(`msg=listening .*listener=(\S+) addr=\S+:(\d+)`)

// Bound sets SASLSSLPort and SSLPort from the server's log, which holds
// its listening lines once it has started (StartServer returned).
func (s *Security) Bound(logs string) error {
	for _, m := range listeningRE.FindAllStringSubmatch(logs, -1) {
		port, err := strconv.Atoi(m[2])
		if err != nil {
			return fmt.Errorf("listener %s: port %q: %w", m[1], m[2], err)
		}
		switch m[1] {
		case "SASL_SSL":
			s.SASLSSLPort = port
		case "SSL":
			s.SSLPort = port
		}
	}
	if s.SASLSSLPort == 0 || s.SSLPort == 0 {
		return fmt.Errorf("the server's log names no SASL_SSL or no SSL listener (ports %d, %d)", s.SASLSSLPort, s.SSLPort)
	}
	return nil
}

// RunnerArgs are the runner flags that connect a client over listener
// ("SASL_SSL" or "SSL"), and the listener's bootstrap address.
func (s *Security) RunnerArgs(listener string) (bootstrap string, args []string) {
	args = []string{"--security-protocol", listener, "--ssl-ca", s.CA}
	switch listener {
	case "SASL_SSL":
		bootstrap = "127.0.0.1:" + strconv.Itoa(s.SASLSSLPort)
		args = append(args, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", ScramUser, "--sasl-password", ScramPassword)
	case "SSL":
		bootstrap = "127.0.0.1:" + strconv.Itoa(s.SSLPort)
		args = append(args, "--ssl-cert", s.ClientCert, "--ssl-key", s.ClientKey)
	}
	return bootstrap, args
}

// SecureCount is how many records the secure produce scenarios write and
// read back.
const SecureCount = 1000

var secureNeeds = append([]kmsg.Key{kmsg.SASLHandshake, kmsg.SASLAuthenticate, kmsg.CreateACLs,
	kmsg.AlterUserSCRAMCredentials}, produceNeeds...)

func securityScenarios() []Scenario {
	return []Scenario{
		{ID: "sasl-scram-512", Title: fmt.Sprintf("over SASL_SSL with SCRAM-SHA-512 (CA-verified server certificate), as a user whose ACLs allow the topic: produce %d records and consume them back", SecureCount),
			Runner: "secure-produce", Listener: "SASL_SSL", Needs: secureNeeds, Partitions: 1,
			Setup: setupACLs("User:"+ScramUser, true), Verify: verifyEndOffset(SecureCount)},
		{ID: "mtls", Title: fmt.Sprintf("over SSL with a client certificate (ssl.client.auth=required; principal %s from its subject), ACLs allowing the topic: produce %d records and consume them back", MTLSPrincipal, SecureCount),
			Runner: "secure-produce", Listener: "SSL", Needs: secureNeeds, Partitions: 1,
			Setup: setupACLs(MTLSPrincipal, true), Verify: verifyEndOffset(SecureCount)},
		{ID: "acl-denied", Title: "over SASL_SSL with SCRAM-SHA-512, as a user allowed to DESCRIBE the topic but not to WRITE it: producing fails with the client's TOPIC_AUTHORIZATION_FAILED (29) error, and the log stays empty",
			Runner: "acl-denied", Listener: "SASL_SSL", Needs: secureNeeds, Partitions: 1,
			Setup: setupACLs("User:"+ScramUser, false), Verify: verifyEndOffset(0)},
	}
}

// setupACLs creates the SCRAM user and gives principal DESCRIBE on the
// scenario's topic, plus (write) WRITE and READ on it and READ on every
// group.
func setupACLs(principal string, write bool) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
		res, err := e.Admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: ScramUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: ScramPassword}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return fmt.Errorf("setup: AlterUserScramCredentials: %w", err)
		}
		ops := []kadm.ACLOperation{kadm.OpDescribe}
		if write {
			ops = append(ops, kadm.OpWrite, kadm.OpRead)
		}
		topic := kadm.NewACLs().Allow(principal).AllowHosts().Topics(e.Topic).Operations(ops...).ResourcePatternType(kadm.ACLPatternLiteral)
		if err := createACLs(ctx, e, topic); err != nil || !write {
			return err
		}
		group := kadm.NewACLs().Allow(principal).AllowHosts().Groups("*").Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
		return createACLs(ctx, e, group)
	}
}

func createACLs(ctx context.Context, e *Env, b *kadm.ACLBuilder) error {
	rs, err := e.Admin.CreateACLs(ctx, b)
	if err != nil {
		return fmt.Errorf("setup: CreateAcls: %w", err)
	}
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("setup: CreateAcls %v: %w", r, r.Err)
		}
	}
	return nil
}

func verifyEndOffset(want int64) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
		end, err := endOffset(ctx, e)
		if err != nil {
			return err
		}
		if end != want {
			return fmt.Errorf("broker side: log end offset %d, want %d", end, want)
		}
		if want == 0 && e.Reported == "" {
			return errors.New("the runner reported no error text")
		}
		return nil
	}
}
