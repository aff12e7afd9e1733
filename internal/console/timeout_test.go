package console

import (
	"net/http/httptest"
	"testing"
	"time"
)

// TestTimeoutOf: a search gets its documented seconds (up to 60) on top
// of the request timeout, not cut at 15 s.
func TestTimeoutOf(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want time.Duration
	}{
		{"/api/topics/t/messages", requestTimeout},
		{"/api/topics/t/messages?search=1", requestTimeout + 5*time.Second},
		{"/api/topics/t/messages?search=1&seconds=60", requestTimeout + 60*time.Second},
		{"/api/topics/t/messages?search=1&seconds=61", requestTimeout},
	} {
		if got := timeoutOf(httptest.NewRequest("GET", tc.url, nil)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.url, got, tc.want)
		}
	}
}
