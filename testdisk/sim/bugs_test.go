//go:build simbugs

package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/paxos"
)

// The tests of this file prove that the checker catches each broken paxos
// variant (paxos.Bugs). The variants are compiled only with the simbugs
// build tag: go test -tags simbugs ./testdisk/sim (make test runs the
// package so). Without the tag TestBrokenPaxosVariantsNeedTag
// (bugs_off_test.go) stands in for them.

// TestBrokenPaxosVariantsCaught: each broken ballot or owner-check variant
// must be caught within 10 seeds of 3000 operations. With -race or -short
// only the variants caught within a few hundred operations run.
func TestBrokenPaxosVariantsCaught(t *testing.T) {
	serial(t)
	for _, v := range []brokenVariant{
		{"skip-phase2-read", true, func(c *Config) { c.Bugs = paxos.BugSkipPhase2Read }, 0},
		{"leader-before-phase2", true, func(c *Config) { c.Bugs = paxos.BugLeaderBeforePhase2 }, 0},
		{"clock-liveness", false, func(c *Config) { c.Bugs = paxos.BugClockLiveness }, 0},
		{"repeat-lver", false, func(c *Config) { lateLeaderConfig(c); c.Bugs = paxos.BugRepeatLver }, 0},
		// From seed 51: of seeds 1-60, 25, 39 and 56 catch it.
		{"stale-shared", false, func(c *Config) { c.Bugs = paxos.BugStaleShared; c.CheckInterval = lateMainLoop }, 51},
	} {
		t.Run(v.name, func(t *testing.T) { requireExclusionBroken(t, requireCaught(t, v)) })
	}
}

// TestNoTimeoutByTimeCaught: the owner check taking over a NO_TIMEOUT
// owner by time is caught within 10 seeds. It needs a pause longer than
// host_dead_seconds over a held lease: seeds 6, 29 and 36 of 1-40 catch it
// within 2,000 operations; from 6 to keep the simulator's time short.
func TestNoTimeoutByTimeCaught(t *testing.T) {
	serial(t)
	requireCaught(t, brokenVariant{name: "notimeout-by-time", first: 6, set: func(c *Config) {
		c.NoTimeout = true
		c.Bugs = paxos.BugNoTimeoutByTime
	}})
}

// TestLateMainLoopSharedRejoinBroken: with a late main loop the
// stale-shared variant clears a live shared holder at staleSharedSeed (h1.1
// acquires exclusive while h2.2 holds it shared, after 123 operations; the
// first of seeds 1-400 to fail within 500), where the real code runs clean
// (TestLateMainLoopSharedRejoin).
func TestLateMainLoopSharedRejoinBroken(t *testing.T) {
	serial(t)
	cfg := DefaultConfig(staleSharedSeed)
	cfg.CheckInterval = lateMainLoop
	cfg.Bugs = paxos.BugStaleShared
	cfg.MaxOps = 500
	r := Run(cfg)
	require.NotNil(t, r.Violation, "the broken variant must still fail: %s", r.Summary())
	require.Contains(t, r.Violation.Error(), "holds it shared")
}

// TestLateLeaderWriteBroken: the repeat-lver variant (no republishing of a
// newer leader seen) hands a version out twice with the late-leader mix of
// TestLateLeaderWrite. Which version repeats depends on the run's timing;
// the checker's finding is the same.
func TestLateLeaderWriteBroken(t *testing.T) {
	serial(t)
	cfg := DefaultConfig(1)
	lateLeaderConfig(&cfg)
	cfg.Bugs = paxos.BugRepeatLver
	cfg.MaxOps = 3000
	r := Run(cfg)
	require.NotNil(t, r.Violation, "the broken variant was not caught")
	require.Contains(t, r.Violation.Error(), "not above the previous")
}

// TestHeavyFaultsBroken: the erase-retract variant breaks mutual exclusion
// at heavySeed with the heavy fault mix, where the real code runs clean
// (TestHeavyFaults).
func TestHeavyFaultsBroken(t *testing.T) {
	bad := heavyRun(heavySeed, paxos.BugEraseRetract)
	require.NotNil(t, bad.Violation, "the erase-retract variant is no longer caught at seed %d with the heavy mix", heavySeed)
}

// TestUnknownLeaderWriteBroken: with BugEraseRetract (both halves of the
// fix for unknown leader writes undone) the contention run of
// TestUnknownLeaderWriteReplays finds two holders at eraseRetractSeed
// within 45 s of simulated time (2 of seeds 1-20 do: 6 and 14).
func TestUnknownLeaderWriteBroken(t *testing.T) {
	serial(t)
	cfg := DefaultConfig(eraseRetractSeed)
	cfg.Hosts, cfg.Resources, cfg.Workers = 16, 1, 1
	cfg.Faults.HostEvery = 0
	cfg.Contend = true
	cfg.TuneHost = daemonFairness
	cfg.Duration = 45 * time.Second
	cfg.Bugs = paxos.BugEraseRetract
	r := Run(cfg)
	if r.Violation == nil {
		t.Fatalf("erase-retract not caught at seed %d: %s", eraseRetractSeed, r.Summary())
	}
	t.Logf("erase-retract caught: %v", r.Violation)
}
