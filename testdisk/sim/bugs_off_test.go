//go:build !simbugs

package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/paxos"
)

// TestBrokenPaxosVariantsNeedTag stands in for the tests of bugs_test.go,
// which prove that the checker catches each broken paxos variant and build
// only with the simbugs tag. Run must refuse a variant this build does not
// contain; the test then skips, or fails under CI so that CI cannot lose
// the self-test by running the package without the tag.
func TestBrokenPaxosVariantsNeedTag(t *testing.T) {
	require.Panics(t, func() { Run(Config{Seed: 1, MaxOps: 1, Bugs: paxos.BugSkipPhase2Read}) },
		"Run must refuse a variant that is not compiled in")
	needBugsTag(t)
}
