package samsa_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samsahq/samsa/internal/proctest"
)

// TestListenerSecurityProtocolsProcess: the samsa binary refuses a secured
// listener it cannot serve (a TLS listener without a keystore, a SASL
// listener with GSSAPI), naming the listener, and starts with the listeners and
// listener.security.protocol.map of Kafka's stock KRaft server.properties,
// whose map lists SSL and SASL protocols no listener uses.
func TestListenerSecurityProtocolsProcess(t *testing.T) {
	bin := proctest.Binary(t)
	for _, tc := range []struct{ listeners, protoMap, extra, want string }{
		{"SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "SSL:SSL,CONTROLLER:PLAINTEXT", "", "ssl.keystore.location (listener SSL): a TLS listener needs a key"},
		{"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT", "sasl.enabled.mechanisms=GSSAPI", "config sasl.enabled.mechanisms (listener SASL_PLAINTEXT): mechanism GSSAPI is not served"},
		{"CLIENTS://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "CLIENTS:SASL_SSL,CONTROLLER:PLAINTEXT", "", "(listener CLIENTS): a TLS listener needs a key"},
	} {
		args := []string{"server", "--override", "log.dirs=" + t.TempDir(), "--override", "listeners=" + tc.listeners}
		if tc.protoMap != "" {
			args = append(args, "--override", "listener.security.protocol.map="+tc.protoMap)
		}
		if tc.extra != "" {
			args = append(args, "--override", tc.extra)
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("listeners=%s: err %v, want an exit naming the listener (%q):\n%s", tc.listeners, err, tc.want, out)
		}
	}

	dir := t.TempDir()
	props := filepath.Join(dir, "server.properties")
	stock := `process.roles=broker,controller
node.id=1
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
socket.request.max.bytes=104857600
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
`
	if err := os.WriteFile(props, []byte(stock), 0o644); err != nil {
		t.Fatal(err)
	}
	s := proctest.StartArgs(t, dir, "server", "--config", props,
		"--override", "log.dirs="+filepath.Join(dir, "data"),
		"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		// Not the default localhost:9644, which another process may hold.
		"--override", "http.listener=")
	if s.Addr == "" {
		t.Fatal("no bootstrap address")
	}
}
