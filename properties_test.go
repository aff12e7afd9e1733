package samsa_test

import (
	"context"
	"strings"
	"testing"

	"github.com/samsahq/samsa"
)

// TestStartProperties: `samsa server`'s entry point takes plain
// properties, refusing an unknown one as startup does.
func TestStartProperties(t *testing.T) {
	ctx := context.Background()
	n, err := samsa.StartProperties(ctx, map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"log.dirs":  t.TempDir(),
		// Not the default localhost:9644, which another process may hold.
		"http.listener": "127.0.0.1:0",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.Addr() == "" || n.ClusterID() == "" {
		t.Errorf("Addr %q, ClusterID %q", n.Addr(), n.ClusterID())
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = samsa.StartProperties(ctx, map[string]string{"log.dirs": t.TempDir(), "no.such.property": "1"}, nil)
	if err == nil || !strings.Contains(err.Error(), "no.such.property") {
		t.Fatalf("unknown property: %v", err)
	}
}
