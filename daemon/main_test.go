package daemon

import (
	"testing"

	"github.com/gosanlock/gosanlock/internal/testutil"
)

// TestMain keeps SIGTERM from ending the test binary
// (testutil.MainIgnoringSIGTERM says why).
func TestMain(m *testing.M) { testutil.MainIgnoringSIGTERM(m, "daemon") }
