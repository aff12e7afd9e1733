package samsa_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/auth"
	"github.com/samsahq/samsa/internal/metadata"
)

// pki is a test CA with a server keystore (localhost, 127.0.0.1) and a
// client keystore (CN=alice,OU=eng,O=Samsa), all files under dir.
type pki struct {
	ca         *auth.DevCA
	caFile     string
	serverFile string
	clientFile string
	jwksFile   string
	oauthKey   *ecdsa.PrivateKey
	clientCert tls.Certificate
	roots      *x509.CertPool
}

func newPKI(t *testing.T, dir string) *pki {
	t.Helper()
	ca, err := auth.NewDevCA("samsa test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{ca: ca, caFile: filepath.Join(dir, "ca.pem"), serverFile: filepath.Join(dir, "server.pem"), clientFile: filepath.Join(dir, "client.pem"), jwksFile: filepath.Join(dir, "jwks.json")}
	write := func(path string, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(p.caFile, ca.CertPEM())
	server, err := ca.Issue(pkix.Name{CommonName: "localhost"}, []string{"localhost", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	write(p.serverFile, server)
	client, err := ca.Issue(pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Samsa"}}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	write(p.clientFile, client)
	if p.clientCert, err = tls.X509KeyPair(client, client); err != nil {
		t.Fatal(err)
	}
	p.roots = x509.NewCertPool()
	p.roots.AddCert(ca.Cert)
	if p.oauthKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	jwks := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.oauthKey.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}}
	data, err := json.Marshal(jwks)
	if err != nil {
		t.Fatal(err)
	}
	write(p.jwksFile, data)
	return p
}

// token is a JWT signed by the JWKS key for sub, expiring at exp.
func (p *pki) token(t *testing.T, sub, aud string, exp time.Time) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: p.oauthKey}, (&jose.SignerOptions{}).WithHeader("kid", "k1").WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(jwt.Claims{Subject: sub, Issuer: "samsa-test", Audience: jwt.Audience{aud}, Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(time.Now().Add(-time.Minute))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (p *pki) clientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.roots, ServerName: "localhost"}
	if withCert {
		c.Certificates = []tls.Certificate{p.clientCert}
	}
	return c
}

// startSecureNode starts a node with PLAINTEXT (first, to create SCRAM
// users), SSL (mTLS required), SASL_SSL (PLAIN, SCRAM, OAUTHBEARER) and
// SASL_PLAINTEXT (SCRAM-SHA-256 only) listeners.
func startSecureNode(t *testing.T, p *pki, extra map[string]string) *samsa.Node {
	t.Helper()
	props := map[string]string{
		"listeners":                                            "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":                       "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":                                    "PEM",
		"ssl.keystore.location":                                p.serverFile,
		"ssl.truststore.type":                                  "PEM",
		"ssl.truststore.location":                              p.caFile,
		"listener.name.ssl.ssl.client.auth":                    "required",
		"ssl.principal.mapping.rules":                          "RULE:^CN=([^,]+),OU=eng,.*$/$1/L,DEFAULT",
		"sasl.enabled.mechanisms":                              "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
		"listener.name.sasl_ssl.plain.sasl.jaas.config":        `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";`,
		"sasl.oauthbearer.jwks.endpoint.url":                   "file://" + p.jwksFile,
		"sasl.oauthbearer.expected.audience":                   "samsa",
		"sasl.oauthbearer.expected.issuer":                     "samsa-test",
	}
	for k, v := range extra {
		props[k] = v
	}
	return startNode(t, t.TempDir(), props)
}

// addScramUsers creates alice with both SCRAM mechanisms over PLAINTEXT.
func addScramUsers(t *testing.T, n *samsa.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, n))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-scram"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-scram-512"},
	})
	if err != nil || res.AllFailed() {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res)
	}
	if err := res.Error(); err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
}

// roundTripRecords produces to and consumes back from topic over addr with
// opts, returning the first error.
func roundTripRecords(t *testing.T, addr, topic string, opts ...kgo.Opt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second), kgo.RecordDeliveryTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("secret")}).FirstErr(); err != nil {
		return err
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		if fs.NumRecords() > 0 {
			if v := string(fs.Records()[0].Value); v != "secret" {
				t.Fatalf("consumed %q", v)
			}
			return nil
		}
	}
}

// metadataErr sends one Metadata request over addr with opts, without
// retries, and returns its error.
func metadataErr(addr string, opts ...kgo.Opt) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

// TestSecurityClients: franz-go produces and consumes over SSL with a client
// certificate, and over SASL_SSL and SASL_PLAINTEXT with PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER; a wrong password, an unknown
// user, a mechanism the listener does not enable, an expired token, a
// token for another audience and a TLS client without a certificate are
// refused with Kafka's errors.
func TestSecurityClients(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir)
	n := startSecureNode(t, p, nil)
	addScramUsers(t, n)
	createTopic(t, newClient(t, n), "sec-topic", 1, nil)
	ssl, saslSSL, saslPlain := n.ListenerAddr("SSL"), n.ListenerAddr("SASL_SSL"), n.ListenerAddr("SASL_PLAINTEXT")
	scram256 := func(user, pass string) sasl.Mechanism { return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism() }
	scram512 := func(user, pass string) sasl.Mechanism { return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism() }
	plainM := func(user, pass string) sasl.Mechanism { return plain.Auth{User: user, Pass: pass}.AsMechanism() }
	oauthM := func(tok string) sasl.Mechanism { return oauth.Auth{Token: tok}.AsMechanism() }
	tlsOpt := kgo.DialTLSConfig(p.clientTLS(false))
	for _, tc := range []struct {
		name string
		addr string
		opts []kgo.Opt
		want error // nil: works
	}{
		{"SSL mTLS", ssl, []kgo.Opt{kgo.DialTLSConfig(p.clientTLS(true))}, nil},
		{"SASL_SSL PLAIN", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(plainM("alice", "alice-secret"))}, nil},
		{"SASL_SSL SCRAM-SHA-256", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(scram256("alice", "alice-scram"))}, nil},
		{"SASL_SSL SCRAM-SHA-512", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(scram512("alice", "alice-scram-512"))}, nil},
		{"SASL_SSL OAUTHBEARER", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(oauthM(p.token(t, "carol", "samsa", time.Now().Add(time.Hour))))}, nil},
		{"SASL_PLAINTEXT SCRAM-SHA-256", saslPlain, []kgo.Opt{kgo.SASL(scram256("alice", "alice-scram"))}, nil},

		{"PLAIN wrong password", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(plainM("alice", "nope"))}, kerr.SaslAuthenticationFailed},
		{"PLAIN unknown user", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(plainM("mallory", "x"))}, kerr.SaslAuthenticationFailed},
		{"SCRAM-SHA-256 wrong password", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(scram256("alice", "nope"))}, kerr.SaslAuthenticationFailed},
		{"SCRAM-SHA-512 unknown user", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(scram512("mallory", "x"))}, kerr.SaslAuthenticationFailed},
		// The 512 password is not the 256 one: credentials are per mechanism.
		{"SCRAM-SHA-512 with the 256 password", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(scram512("alice", "alice-scram"))}, kerr.SaslAuthenticationFailed},
		{"OAUTHBEARER expired", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(oauthM(p.token(t, "carol", "samsa", time.Now().Add(-time.Hour))))}, kerr.SaslAuthenticationFailed},
		{"OAUTHBEARER other audience", saslSSL, []kgo.Opt{tlsOpt, kgo.SASL(oauthM(p.token(t, "carol", "other", time.Now().Add(time.Hour))))}, kerr.SaslAuthenticationFailed},
		{"PLAIN not enabled on SASL_PLAINTEXT", saslPlain, []kgo.Opt{kgo.SASL(plainM("alice", "alice-secret"))}, kerr.UnsupportedSaslMechanism},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.want == nil {
				err = roundTripRecords(t, tc.addr, "sec-topic", tc.opts...)
			} else {
				err = metadataErr(tc.addr, tc.opts...)
			}
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("SSL without a client certificate", func(t *testing.T) {
		if err := metadataErr(ssl, tlsOpt); err == nil {
			t.Fatal("a client without a certificate was served on a listener with ssl.client.auth=required")
		}
	})
	t.Run("plaintext client on SSL", func(t *testing.T) {
		if err := metadataErr(ssl); err == nil {
			t.Fatal("a plaintext client was served on an SSL listener")
		}
	})
}

// validBatch is a v2 record batch of one record, its length and CRC-32C
// set.
func validBatch(value string) []byte {
	b := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1,
		Records: (&kmsg.Record{Length: int32(6 + len(value)), Value: []byte(value)}).AppendTo(nil)}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// TestProduceBeforeSASL: a client that sends Produce on a SASL listener
// before authenticating is disconnected and nothing is written.
func TestProduceBeforeSASL(t *testing.T) {
	p := newPKI(t, t.TempDir())
	n := startSecureNode(t, p, nil)
	createTopic(t, newClient(t, n), "guarded", 1, nil)
	conn := dial(t, n.ListenerAddr("SASL_PLAINTEXT"))
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	if resp := roundTrip(t, conn, av, 1).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "guarded"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = validBatch("intruder")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 2)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, conn)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(newClient(t, n)).ListEndOffsets(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("guarded", 0); o.Offset != 0 {
		t.Fatalf("end offset %d after an unauthenticated Produce, want 0", o.Offset)
	}
}

// TestSecureCluster: three combined nodes whose only listeners are
// SASL_SSL: controllers speak raft and brokers reach controllers with
// PLAIN (controller credentials live in the JAAS config, as SCRAM's are in
// the metadata log they replicate), brokers replicate with SCRAM-SHA-512
// from the bootstrap records of every node's log dir; a client with
// SCRAM-SHA-512 produces with acks=all to a topic of replication factor 3
// and consumes it back, a plaintext client gets nothing.
func TestSecureCluster(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t, dir)
	var boot []metadata.Record
	for _, u := range [][2]string{{"broker", "broker-secret"}, {"alice", "alice-secret"}, {"carol", "carol-secret"}} {
		c, err := auth.NewScramCredential(auth.ScramSHA512, u[1], 0)
		if err != nil {
			t.Fatal(err)
		}
		boot = append(boot, metadata.UserScramCredentialRecord{Name: u[0], Mechanism: auth.ScramSHA512, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations})
	}
	for id := 1; id <= 3; id++ {
		d := filepath.Join(dir, "nodes", "node-"+strconv.Itoa(id))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := metadata.WriteBootstrap(d, boot); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := samsa.StartCluster(ctx, samsa.ClusterConfig{Nodes: 3, Dir: filepath.Join(dir, "nodes"), Properties: map[string]string{
		// The listeners StartCluster names PLAINTEXT and CONTROLLER, both
		// mapped to SASL_SSL.
		"listener.security.protocol.map":                         "PLAINTEXT:SASL_SSL,CONTROLLER:SASL_SSL",
		"ssl.keystore.location":                                  p.serverFile,
		"ssl.truststore.location":                                p.caFile,
		"listener.name.controller.sasl.enabled.mechanisms":       "PLAIN",
		"listener.name.controller.plain.sasl.jaas.config":        `org.apache.kafka.common.security.plain.PlainLoginModule required username="ctrl" password="ctrl-secret" user_ctrl="ctrl-secret" user_bob="bob-secret";`,
		"sasl.mechanism.controller.protocol":                     "PLAIN",
		"listener.name.plaintext.sasl.enabled.mechanisms":        "SCRAM-SHA-512",
		"listener.name.plaintext.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"sasl.mechanism.inter.broker.protocol":                   "SCRAM-SHA-512",
		"default.replication.factor":                             "3",
		"min.insync.replicas":                                    "2",
		"offsets.topic.replication.factor":                       "3",
		// ACLs on: the controllers (ctrl) and brokers (broker) are super
		// users, so the raft connections and the inter-broker requests
		// are allowed their CLUSTER_ACTION; alice is one for the round
		// trip below.
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:ctrl;User:broker;User:alice",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	opts := []kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DialTLSConfig(p.clientTLS(false)), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// min.insync.replicas=3: an acks=all produce succeeds only once both
	// followers fetched the records over the SASL_SSL inter-broker
	// listener.
	all := "3"
	if r, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": &all}, "replicated"); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	if err := roundTripRecords(t, c.Addrs()[0], "replicated", opts[1:]...); err != nil {
		t.Fatalf("produce and consume: %v", err)
	}
	for _, addr := range append(c.Addrs(), c.ControllerAddr(1)) {
		if err := metadataErr(addr); err == nil {
			t.Fatalf("a plaintext client was served at %s", addr)
		}
	}
	// Admin requests are authorized on the node that receives them,
	// against the client's principal, also on the nodes that forward them
	// to the active controller under their own (super user) principal
	// (KIP-590): carol's CreateTopics is refused by every node until an
	// ACL gives her CREATE on the cluster, then served by every node.
	carolOpts := []kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DialTLSConfig(p.clientTLS(false)), kgo.SASL(scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism())}
	carol, err := kgo.NewClient(carolOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer carol.Close()
	createVia := func(id int32, topic string) int16 {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 3
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10000
		resp, err := req.RequestWith(ctx, carol.Broker(int(id)))
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("CreateTopics via node %d: %v", id, err)
		}
		return resp.Topics[0].ErrorCode
	}
	for id := int32(1); id <= 3; id++ {
		wantCode(t, fmt.Sprintf("CreateTopics as carol via node %d", id), createVia(id, fmt.Sprintf("carol-%d", id)), kerr.TopicAuthorizationFailed)
	}
	if r, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:carol").AllowHosts().Clusters().Operations(kadm.OpCreate)); err != nil || r[0].Err != nil {
		t.Fatalf("CreateAcls: %v %v", err, r)
	}
	for id := int32(1); id <= 3; id++ {
		waitFor(t, 10*time.Second, fmt.Sprintf("carol creates a topic via node %d", id), func() bool {
			return createVia(id, fmt.Sprintf("carol-%d", id)) == 0
		})
	}
	// bob authenticates on the controller listener but may not
	// CLUSTER_ACTION the cluster: his raft handshake is refused, as
	// Kafka's ControllerApis refuse his Vote or BeginQuorumEpoch.
	if err := raftHandshake(t, c.ControllerAddr(1), p.clientTLS(false), "bob", "bob-secret"); err == nil {
		t.Fatal("a raft connection from a principal without CLUSTER_ACTION was kept open")
	}
}

// raftHandshake opens a connection to a SASL_SSL controller listener,
// authenticates with PLAIN (SaslHandshake v1, SaslAuthenticate v1), sends
// the raft handshake of voter 2 to voter 1, and reads: it returns the
// read's error (io.EOF when the node closed the connection), nil when the
// connection was still open after two seconds.
func raftHandshake(t *testing.T, addr string, tc *tls.Config, user, pass string) error {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	roundTrip := func(req kmsg.Request, resp kmsg.Response) {
		t.Helper()
		req.SetVersion(1)
		resp.SetVersion(1)
		if err := resp.ReadFrom(rawRequest(t, conn, req, 7)); err != nil {
			t.Fatal(err)
		}
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	roundTrip(hs, hsResp)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SASLAuthBytes = []byte("\x00" + user + "\x00" + pass)
	auResp := kmsg.NewPtrSASLAuthenticateResponse()
	roundTrip(au, auResp)
	if hsResp.ErrorCode != 0 || auResp.ErrorCode != 0 {
		t.Fatalf("SASL PLAIN as %s: handshake %d, authenticate %d", user, hsResp.ErrorCode, auResp.ErrorCode)
	}
	hello := append([]byte("SRFT"), 0)
	hello = binary.BigEndian.AppendUint32(hello, 2)
	hello = binary.BigEndian.AppendUint32(hello, 1)
	if _, err := conn.Write(hello); err != nil {
		return err
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

// TestDescribeBrokerSecurityConfigs: DescribeConfigs of a broker lists the
// ssl.* and sasl.* properties, the listener-prefixed ones set, with
// Kafka's types; passwords (a PEM key's password, a JAAS config) are
// sensitive and have no value, in the config or its synonyms; broker.id
// is the node's id.
func TestDescribeBrokerSecurityConfigs(t *testing.T) {
	p := newPKI(t, t.TempDir())
	n := startSecureNode(t, p, map[string]string{"ssl.key.password": "not-shown"})
	cl := newClient(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs: %v %+v", err, resp)
	}
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		got[c.Name] = c
	}
	jaas := "listener.name.sasl_ssl.plain.sasl.jaas.config"
	for _, tc := range []struct {
		name      string
		value     *string // nil: no value
		typ       kmsg.ConfigType
		sensitive bool
	}{
		{"ssl.keystore.location", &p.serverFile, kmsg.ConfigTypeString, false},
		{"ssl.key.password", nil, kmsg.ConfigTypePassword, true},
		{"ssl.truststore.password", nil, kmsg.ConfigTypePassword, true},
		{jaas, nil, kmsg.ConfigTypePassword, true},
		{"sasl.enabled.mechanisms", kadmStr("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"), kmsg.ConfigTypeList, false},
		{"ssl.client.auth", kadmStr("none"), kmsg.ConfigTypeString, false},
		{"broker.id", kadmStr("1"), kmsg.ConfigTypeInt, false},
		{"node.id", kadmStr("1"), kmsg.ConfigTypeInt, false},
		{"auto.create.topics.enable", kadmStr("true"), kmsg.ConfigTypeBoolean, false},
		{"num.partitions", kadmStr("1"), kmsg.ConfigTypeInt, false},
		{"log.retention.ms", nil, kmsg.ConfigTypeLong, false},
		{"log.retention.hours", kadmStr("168"), kmsg.ConfigTypeInt, false},
		{"log.cleanup.policy", kadmStr("delete"), kmsg.ConfigTypeList, false},
	} {
		c, ok := got[tc.name]
		switch {
		case !ok:
			t.Errorf("%s not described", tc.name)
		case (c.Value == nil) != (tc.value == nil) || (c.Value != nil && *c.Value != *tc.value):
			t.Errorf("%s = %q (null %v), want %q (null %v)", tc.name, deref(c.Value), c.Value == nil, deref(tc.value), tc.value == nil)
		case c.ConfigType != tc.typ || c.IsSensitive != tc.sensitive:
			t.Errorf("%s: type %v sensitive %v, want %v %v", tc.name, c.ConfigType, c.IsSensitive, tc.typ, tc.sensitive)
		}
		for _, s := range c.ConfigSynonyms {
			if tc.sensitive && s.Value != nil {
				t.Errorf("%s: synonym %s shows a value", tc.name, s.Name)
			}
		}
	}
}

// TestHTTPListenerTLS: http.listener.security.protocol=SSL (Samsa's own,
// beyond Kafka) serves /healthz and /metrics over TLS with the ssl.*
// properties resolved as for a listener named HTTP; with
// listener.name.http.ssl.client.auth=required a scraper without a client
// certificate, or speaking plain HTTP, gets nothing.
func TestHTTPListenerTLS(t *testing.T) {
	p := newPKI(t, t.TempDir())
	n := startSecureNode(t, p, map[string]string{
		"http.listener":                      "127.0.0.1:0",
		"http.listener.security.protocol":    "SSL",
		"listener.name.http.ssl.client.auth": "required",
	})
	get := func(tc *tls.Config, scheme string) (string, error) {
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
		resp, err := cl.Get(scheme + "://" + n.HTTPAddr() + "/healthz")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b)), err
	}
	if got, err := get(p.clientTLS(true), "https"); err != nil || got != "200 ok" {
		t.Fatalf("https with a client certificate: %q, %v", got, err)
	}
	if got, err := get(p.clientTLS(false), "https"); err == nil {
		t.Fatalf("https without a client certificate was served: %q", got)
	}
	if got, err := get(nil, "http"); err == nil && got == "200 ok" {
		t.Fatal("plain http was served")
	}
}
