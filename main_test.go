package samsa_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/samsahq/samsa/internal/proctest"
)

// TestMain fails the package if a test leaves goroutines behind: every node
// and client a test starts must stop everything it started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(proctest.Main(m)) }
