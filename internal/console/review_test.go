package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestEmptyLists checks that a list with nothing in it is [] in the API's
// JSON, never null.
func TestEmptyLists(t *testing.T) {
	_, a := startNode(t, false)
	for _, path := range []string{"/api/topics?q=nothing-matches", "/api/topics?page=99", "/api/groups", "/api/dlt"} {
		req, _ := http.NewRequest("GET", a.base+path, nil)
		code, body := a.do(req, nil)
		if code != http.StatusOK || strings.Contains(body, "null") {
			t.Errorf("GET %s: %d %s, want 200 without null", path, code, body)
		}
	}
}
