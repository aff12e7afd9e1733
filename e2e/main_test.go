package e2e

import (
	"os"
	"testing"

	"github.com/samsahq/samsa/internal/proctest"
)

// TestMain removes the samsa binaries the tests built (proctest.Main).
func TestMain(m *testing.M) { os.Exit(proctest.Main(m).Run()) }
