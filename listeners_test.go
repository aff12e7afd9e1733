package samsa_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/samsahq/samsa/internal/proctest"
)

// TestListenerSecurityProtocolsProcess: the samsa binary refuses a listener
// whose security protocol is not PLAINTEXT (it would serve plaintext on
// it), naming the listener, and starts with the listeners and
// listener.security.protocol.map of Kafka's stock KRaft server.properties,
// whose map lists SSL and SASL protocols no listener uses.
func TestListenerSecurityProtocolsProcess(t *testing.T) {
	bin := proctest.Binary(t)
	for _, tc := range []struct{ listeners, protoMap, want string }{
		{"SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "", "listener SSL uses security protocol SSL"},
		{"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "", "listener SASL_PLAINTEXT uses security protocol SASL_PLAINTEXT"},
		{"CLIENTS://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "CLIENTS:SASL_SSL,CONTROLLER:PLAINTEXT", "listener CLIENTS uses security protocol SASL_SSL"},
	} {
		args := []string{"server", "--override", "log.dirs=" + t.TempDir(), "--override", "listeners=" + tc.listeners}
		if tc.protoMap != "" {
			args = append(args, "--override", "listener.security.protocol.map="+tc.protoMap)
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
		"--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
	if s.Addr == "" {
		t.Fatal("no bootstrap address")
	}
}
