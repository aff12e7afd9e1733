package samsa_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// confluentSecure produces one record with confluent-kafka (librdkafka)
// using the JSON config in argv[2] (oauth_token, when set, becomes an
// oauth_cb) and reads it back; it prints OK or the error.
const confluentSecure = `
import json, sys, time
from confluent_kafka import Producer, Consumer, KafkaError, KafkaException
addr, topic, conf = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
tok = conf.pop("oauth_token", None)
conf["bootstrap.servers"] = addr
if tok:
    conf["oauth_cb"] = lambda _cfg: (tok, time.time() + 3600)
fatal = []
def on_error(e):
    if e.code() == KafkaError._AUTHENTICATION:
        fatal.append(e)
conf["error_cb"] = on_error
try:
    p = Producer(dict(conf))
    err = []
    p.produce(topic, b"confluent", on_delivery=lambda e, m: err.append(e))
    deadline = time.time() + 15
    while not err and not fatal and time.time() < deadline:
        p.poll(0.1)
    if fatal:
        print("ERR", fatal[0].str()); sys.exit(0)
    if not err or err[0] is not None:
        print("ERR produce", err); sys.exit(0)
    c = Consumer(dict(conf, **{"group.id": "sec-" + topic, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    deadline = time.time() + 20
    while time.time() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None and m.value() == b"confluent":
            print("OK"); break
        if m is not None and m.error() is not None and m.error().fatal():
            print("ERR", m.error()); break
    else:
        print("ERR nothing consumed")
    c.close()
except KafkaException as e:
    print("ERR", e)
`

// kafkaPythonSecure produces one record with kafka-python using the JSON
// keyword arguments in argv[3] and prints OK or the error.
const kafkaPythonSecure = `
import json, sys
from kafka import KafkaProducer
try:
    from kafka.sasl.oauth import AbstractTokenProvider
except ImportError:
    from kafka.oauth.abstract import AbstractTokenProvider
addr, topic, conf = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
tok = conf.pop("oauth_token", None)
if tok:
    class P(AbstractTokenProvider):
        def token(self): return tok
    conf["sasl_oauth_token_provider"] = P()
try:
    p = KafkaProducer(bootstrap_servers=addr, **conf)
    p.send(topic, b"kafka-python").get(timeout=15)
    p.close()
    print("OK")
except Exception as e:
    print("ERR", type(e).__name__, e)
`

func python(t *testing.T, module, script string, args ...string) string {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import "+module).Run(); err != nil {
		t.Skipf("%s not installed for /usr/bin/python3", module)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, stderr, err := stdoutOnly(exec.CommandContext(ctx, "/usr/bin/python3", append([]string{"-c", script}, args...)...))
	if err != nil {
		t.Fatalf("python %s: %v\n%s\nstderr:\n%s", module, err, out, stderr)
	}
	return strings.TrimSpace(string(out))
}

// stdoutOnly runs cmd and returns its standard output, to be parsed, and
// its standard error apart, for failure messages: librdkafka and the
// Python clients log to stderr at times (a BGQUEUE line when librdkafka's
// admin client closes), which would otherwise land inside the output.
func stdoutOnly(cmd *exec.Cmd) (stdout []byte, stderr string, err error) {
	var e strings.Builder
	cmd.Stderr = &e
	stdout, err = cmd.Output()
	return stdout, e.String(), err
}

func jsonArg(t *testing.T, v map[string]any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSecurityOtherClients: kcat, confluent-kafka and kafka-python connect
// over SSL with a client certificate, and over SASL_SSL with PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512 and (the Python clients, whose token
// callbacks take a signed JWT) OAUTHBEARER; a wrong password fails with an
// authentication error (librdkafka: "SASL authentication error:
// Authentication failed"), kafka-python with an error. kafka-python 2.0
// uses SaslHandshake v0 and raw tokens, librdkafka and franz-go v1.
func TestSecurityOtherClients(t *testing.T) {
	p := newPKI(t, t.TempDir())
	n := startSecureNode(t, p, nil)
	addScramUsers(t, n)
	createTopic(t, newClient(t, n), "others", 1, nil)
	ssl, saslSSL := n.ListenerAddr("SSL"), n.ListenerAddr("SASL_SSL")
	token := p.token(t, "carol", "samsa", time.Now().Add(time.Hour))

	type cred struct {
		name, addr, mech, user, pass string
		ok                           bool
	}
	creds := []cred{
		{"mTLS", ssl, "", "", "", true},
		{"PLAIN", saslSSL, "PLAIN", "alice", "alice-secret", true},
		{"SCRAM-SHA-256", saslSSL, "SCRAM-SHA-256", "alice", "alice-scram", true},
		{"SCRAM-SHA-512", saslSSL, "SCRAM-SHA-512", "alice", "alice-scram-512", true},
		{"OAUTHBEARER", saslSSL, "OAUTHBEARER", "", "", true},
		{"SCRAM-SHA-256 wrong password", saslSSL, "SCRAM-SHA-256", "alice", "nope", false},
		{"PLAIN wrong password", saslSSL, "PLAIN", "alice", "nope", false},
	}

	t.Run("kcat", func(t *testing.T) {
		if _, err := exec.LookPath("kcat"); err != nil {
			t.Skip("kcat not installed")
		}
		for _, c := range creds {
			if c.mech == "OAUTHBEARER" {
				continue // librdkafka's kcat can only send unsecured tokens
			}
			t.Run(c.name, func(t *testing.T) {
				args := []string{"-b", c.addr, "-X", "ssl.ca.location=" + p.caFile}
				if c.mech == "" {
					args = append(args, "-X", "security.protocol=SSL", "-X", "ssl.certificate.location="+p.clientFile, "-X", "ssl.key.location="+p.clientFile)
				} else {
					args = append(args, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms="+c.mech, "-X", "sasl.username="+c.user, "-X", "sasl.password="+c.pass)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, "kcat", append(args, "-P", "-t", "others")...)
				cmd.Stdin = strings.NewReader("kcat\n")
				out, err := cmd.CombinedOutput()
				if c.ok && err != nil {
					t.Fatalf("kcat -P: %v\n%s", err, out)
				}
				if !c.ok {
					if err == nil || !strings.Contains(strings.ToLower(string(out)), "authentication failed") {
						t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
					}
					return
				}
				out, err = exec.CommandContext(ctx, "kcat", append(args, "-C", "-t", "others", "-o", "beginning", "-e", "-q")...).CombinedOutput()
				if err != nil || !strings.Contains(string(out), "kcat") {
					t.Fatalf("kcat -C: %v\n%s", err, out)
				}
			})
		}
	})

	// The Python clients: their config names (confluent-kafka's are
	// librdkafka's, kafka-python's its own), what a wrong password must
	// print. kafka-python 2.0 authenticates with SaslHandshake v0, after
	// which a failure only closes the connection: it reports no broker
	// available.
	for _, pc := range []struct {
		name, module, script              string
		protocol, cafile, cert, key, mech string
		user, pass, wrongPassword         string
	}{
		{"confluent-kafka", "confluent_kafka", confluentSecure, "security.protocol", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "sasl.mechanisms", "sasl.username", "sasl.password", "SASL authentication error: Authentication failed"},
		{"kafka-python", "kafka", kafkaPythonSecure, "security_protocol", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "ERR"},
	} {
		t.Run(pc.name, func(t *testing.T) {
			for _, c := range creds {
				t.Run(c.name, func(t *testing.T) {
					conf := map[string]any{pc.cafile: p.caFile, pc.protocol: "SASL_SSL", pc.mech: c.mech}
					switch c.mech {
					case "":
						conf = map[string]any{pc.cafile: p.caFile, pc.protocol: "SSL", pc.cert: p.clientFile, pc.key: p.clientFile}
					case "OAUTHBEARER":
						conf["oauth_token"] = token
					default:
						conf[pc.user], conf[pc.pass] = c.user, c.pass
					}
					out := python(t, pc.module, pc.script, c.addr, "others", jsonArg(t, conf))
					if c.ok && out != "OK" || !c.ok && !strings.Contains(out, pc.wrongPassword) {
						t.Fatalf("%s: %s", pc.name, out)
					}
				})
			}
		})
	}
}
