package samsa_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/samsahq/samsa"
)

// TestConsoleOnHTTPListener: a node's http.listener serves the web
// console at / beside /metrics, and console.read.only reaches it.
func TestConsoleOnHTTPListener(t *testing.T) {
	for _, ro := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		props := map[string]string{}
		if ro {
			props["console.read.only"] = "true"
		}
		n, err := samsa.Start(ctx, samsa.Config{Dir: t.TempDir(), HTTPListener: "127.0.0.1:0", Properties: props})
		if err != nil {
			t.Fatal(err)
		}
		get := func(path string) (int, string) {
			resp, err := http.Get("http://" + n.HTTPAddr() + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, body := get("/"); code != 200 || !strings.Contains(body, "<title>Overview") || strings.Contains(body, "read-only") != ro {
			t.Errorf("read-only %v: GET /: %d %.300s", ro, code, body)
		}
		if code, body := get("/topics"); code != 200 || strings.Contains(body, `id="create-topic"`) == ro {
			t.Errorf("read-only %v: GET /topics: %d %.300s", ro, code, body)
		}
		if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "samsa_build_info") {
			t.Errorf("GET /metrics: %d", code)
		}
		if code, _ := get("/api/overview"); code != 200 {
			t.Errorf("GET /api/overview: %d", code)
		}
		n.Close()
	}
}
