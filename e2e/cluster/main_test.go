package cluster

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/samsahq/samsa/internal/proctest"
)

// TestMain fails the package if a test leaves goroutines behind (clients,
// proxies, process watchers): every test stops what it starts.
func TestMain(m *testing.M) { goleak.VerifyTestMain(proctest.Main(m)) }
