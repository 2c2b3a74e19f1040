// Package proctest tests live reexec with real daemon processes: our
// binary (or a build of the previous release) runs as the daemon in its
// own run directory, and the tests reexec it while clients hold their
// connections, registrations, lockspaces and leases (docs/upgrade.md).
// They live apart from package daemon, whose in-process tests they would
// otherwise slow down.
package proctest

import (
	"testing"

	"github.com/gosanlock/gosanlock/internal/testutil"
)

// TestMain keeps SIGTERM from ending the test binary
// (testutil.MainIgnoringSIGTERM says why).
func TestMain(m *testing.M) { testutil.MainIgnoringSIGTERM(m, "proctest") }
