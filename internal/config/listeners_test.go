package config

import (
	"strings"
	"testing"
)

// kafkaKRaftServerProperties is the settings of Kafka's stock
// config/kraft/server.properties (3.x; 4.0's config/server.properties has the
// same listeners and map).
const kafkaKRaftServerProperties = `
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
`

func TestKafkaStockServerProperties(t *testing.T) {
	props, err := ReadProperties(strings.NewReader(kafkaKRaftServerProperties))
	if err != nil {
		t.Fatal(err)
	}
	n, err := Parse(props)
	if err != nil {
		t.Fatalf("Kafka's server.properties refused: %v", err)
	}
	if p, _ := n.SecurityProtocol("SSL"); p != "SSL" {
		t.Fatalf("SSL maps to %q", p)
	}
}

func TestListenerSecurityProtocols(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]string
		want  string // error substring; empty: accepted
	}{
		{"defaults", nil, ""},
		// Kafka's default map has no CONTROLLER entry: KRaft maps the
		// controller listener names to PLAINTEXT when the map is not set.
		{"default map, controller listener", map[string]string{"listeners": "PLAINTEXT://:1,CONTROLLER://:2"}, ""},
		{"SSL listener by name", map[string]string{"listeners": "SSL://:1,CONTROLLER://:2"}, "ssl.keystore.location (listener SSL): a TLS listener needs a key"},
		{"SSL listener with keystore", map[string]string{"listeners": "SSL://:1,CONTROLLER://:2", "listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT", "ssl.keystore.location": "/k.pem"}, ""},
		{"JKS keystore", map[string]string{"listeners": "SSL://:1,CONTROLLER://:2", "ssl.keystore.location": "/k.jks", "ssl.keystore.type": "JKS"}, "ssl.keystore.type (listener SSL): JKS is not served"},
		{"bad client auth", map[string]string{"listeners": "SSL://:1,CONTROLLER://:2", "ssl.keystore.location": "/k.pem", "listener.name.ssl.ssl.client.auth": "always"}, "ssl.client.auth (listener SSL)"},
		{"SASL_PLAINTEXT listener by name", map[string]string{"listeners": "PLAINTEXT://:1,SASL_PLAINTEXT://:3,CONTROLLER://:2", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"}, ""},
		{"GSSAPI", map[string]string{"listeners": "SASL_PLAINTEXT://:3,CONTROLLER://:2", "sasl.enabled.mechanisms": "GSSAPI"}, "mechanism GSSAPI is not served"},
		{"PLAIN without users", map[string]string{"listeners": "SASL_PLAINTEXT://:3,CONTROLLER://:2", "sasl.enabled.mechanisms": "PLAIN"}, "plain.sasl.jaas.config"},
		{"PLAIN with users", map[string]string{"listeners": "SASL_PLAINTEXT://:3,CONTROLLER://:2", "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": `x required user_a="b";`}, ""},
		{"unknown listener property", map[string]string{"listener.name.x.ssl.bogus": "1"}, "unknown config listener.name.x.ssl.bogus"},
		{"mapped to SASL_SSL", map[string]string{"listeners": "EXTERNAL://:1,CONTROLLER://:2", "listener.security.protocol.map": "external:sasl_ssl,CONTROLLER:PLAINTEXT"}, "listener EXTERNAL): a TLS listener needs a key"},
		{"unmapped name", map[string]string{"listeners": "EXTERNAL://:1,CONTROLLER://:2"}, "listener EXTERNAL has no security protocol"},
		{"mapped names", map[string]string{"listeners": "EXTERNAL://:1,INTERNAL://:3,CONTROLLER://:2", "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL"}, ""},
		// An explicit map must list the controller listener too, as in Kafka.
		{"explicit map without controller", map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"}, "listener CONTROLLER has no security protocol"},
		{"SSL controller", map[string]string{"listeners": "PLAINTEXT://:1,CONTROLLER://:2", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}, "(listener CONTROLLER): a TLS listener needs a key"},
		{"advertised SSL", map[string]string{"advertised.listeners": "SSL://h:1"}, "(listener SSL): a TLS listener needs a key"},
		{"unknown protocol", map[string]string{"listener.security.protocol.map": "PLAINTEXT:TLS"}, "unknown security protocol TLS"},
		{"no colon", map[string]string{"listener.security.protocol.map": "PLAINTEXT"}, "listener.security.protocol.map"},
		{"broker-only, default map", map[string]string{"process.roles": "broker", "node.id": "2", "controller.quorum.voters": "1@h:9093", "listeners": "PLAINTEXT://:1"}, ""},
		{"broker-only, controller not mapped", map[string]string{"process.roles": "broker", "node.id": "2", "controller.quorum.voters": "1@h:9093", "listeners": "PLAINTEXT://:1", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"}, "controller.listener.names: listener CONTROLLER has no security protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.props)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestMaxConnectionsConfig(t *testing.T) {
	n, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.MaxConnections != 2147483647 || n.MaxConnectionsPerIP != 2147483647 || len(n.MaxConnectionsPerIPOverrides) != 0 {
		t.Fatalf("defaults: %d %d %v", n.MaxConnections, n.MaxConnectionsPerIP, n.MaxConnectionsPerIPOverrides)
	}
	n, err = Parse(map[string]string{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "host1:10, 127.0.0.1:200,::1:5"})
	if err != nil {
		t.Fatal(err)
	}
	if o := n.MaxConnectionsPerIPOverrides; len(o) != 3 || o["host1"] != 10 || o["127.0.0.1"] != 200 || o["::1"] != 5 {
		t.Fatalf("overrides %v", o)
	}
	for _, tc := range []struct{ props map[string]string }{
		{map[string]string{"max.connections.per.ip": "0"}},
		{map[string]string{"max.connections": "-1"}},
		{map[string]string{"max.connections.per.ip.overrides": "host1"}},
		{map[string]string{"max.connections.per.ip.overrides": "host1:x"}},
		{map[string]string{"max.connections.per.ip.overrides": ":5"}},
		{map[string]string{"max.connections.per.ip.overrides": "host1:-1"}},
	} {
		if _, err := Parse(tc.props); err == nil {
			t.Errorf("Parse(%v) accepted", tc.props)
		}
	}
}
