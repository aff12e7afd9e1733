package samsa_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/samsahq/samsa"
	"github.com/samsahq/samsa/internal/testutil"
)

// TestAuthLogsClipClientStrings: a SASL/PLAIN authentication that fails
// on a 100 KB authorization id the client chose logs "failed
// authentication" in a line under 4 KB (clip.String), not one of 100 KB.
func TestAuthLogsClipClientStrings(t *testing.T) {
	logs := new(testutil.SyncBuffer)
	n := startConfig(t, samsa.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, nil)), Properties: map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`,
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mech := plain.Auth{Zid: strings.Repeat("z", 100_000), User: "alice", Pass: "alice-secret"}.AsMechanism()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.ListenerAddr("SASL_PLAINTEXT")), kgo.SASL(mech), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("authenticated with an authorization id other than the user")
	}
	waitFor(t, 30*time.Second, "the failed authentication logged", func() bool {
		return strings.Contains(logs.String(), "failed authentication")
	})
	for line := range strings.Lines(logs.String()) {
		if len(line) > 4<<10 {
			t.Fatalf("a log line of %d bytes: %.200s...", len(line), line)
		}
	}
}
